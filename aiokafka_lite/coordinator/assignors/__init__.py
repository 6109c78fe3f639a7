"""aiokafka's ``aiokafka.coordinator.assignors``: ``abstract``, ``range``, ``roundrobin``
and ``sticky``, each the assignor of that name in :mod:`aiokafka_lite.consumer.assignors`."""
