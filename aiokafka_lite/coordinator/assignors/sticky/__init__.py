"""aiokafka's ``aiokafka.coordinator.assignors.sticky`` package."""
