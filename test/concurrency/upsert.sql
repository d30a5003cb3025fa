-- pgbench, soak: write by the unique key u, half of the time in a hot range
-- of 500 keys: ON CONFLICT (u) DO UPDATE that changes k (not HOT: every
-- index gets an entry), ON CONFLICT DO NOTHING without a target (the
-- primary key and u are both arbiters), and a plain INSERT whose duplicate
-- error is caught.  Each statement writes at most one existing row.
\set h random(0, 1)
\set g random(1, 25000)
\set g case when :h = 0 then 1 + :g % 500 else :g end
INSERT INTO conc_rows (k, t, u) VALUES (conc_new_key(), conc_t(conc_new_key()), 'u' || :g)
	ON CONFLICT (u) DO UPDATE SET n = conc_rows.n + 1, k = excluded.k;
INSERT INTO conc_rows (k, u) VALUES (conc_new_key(), 'u' || (:g + 1)) ON CONFLICT DO NOTHING;
SELECT conc_insert_u(:g + 2);
