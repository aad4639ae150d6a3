"""Apache Flink jobs: the streaming drift job, the smoke job, and their submission."""
