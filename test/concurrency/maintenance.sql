-- pgbench, concurrency suite (1 client): VACUUM, verify both indexes while writers wait, look at stats, pause
VACUUM conc_rows;
SELECT pmhash_verify('conc_rows_k');
SELECT pmhash_verify('conc_rows_t');
SELECT shards, segments, buckets, entries FROM pmhash_stats('conc_rows_k');
\sleep 3 s
