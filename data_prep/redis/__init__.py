"""The Redis wing: the project's own Redis Cluster (servers, keeper, delay proxy, topology) and a
cluster the user runs, behind one interface; the keys and markers a dataset is stored under; the
Redis location a run reads from. The backend itself registers in data_prep.backends.redis_store."""
