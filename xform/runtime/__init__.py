"""What runs compiled graphs and keeps them: the cache, dependency recording (redefinition
checks), the executors of parallel maps, and the global config."""
