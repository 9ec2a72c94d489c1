"""Redis Clusters: the project's own (servers, keeper, delay proxy, topology) and one the user
runs, behind one interface; the keys and markers a dataset is stored under; the Redis location a
run reads from. The backend itself registers in data_prep.backends.redis_store. (Not named
`redis`: a script run from data_prep/ would import it in place of redis-py.)"""
