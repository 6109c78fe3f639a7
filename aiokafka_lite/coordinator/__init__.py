"""aiokafka's ``aiokafka.coordinator`` paths: the partition assignors and their protocol
types. The group membership itself is :mod:`aiokafka_lite.consumer.coordinator`."""
