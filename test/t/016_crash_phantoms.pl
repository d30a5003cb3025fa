# Phantoms of a crash whose TIDs the heap reuses.
#
# An index entry reaches the file when its row is inserted, its WAL record
# later.  A crash before the heap's WAL of the row was flushed leaves an
# entry (a phantom, flagged unverified by recovery) whose TID points at
# nothing, and the first rows inserted after the restart take those TIDs.
# A phantom must then never stand for the new row: not in a scan of a
# partial index whose predicate the new row fails, not in the uniqueness
# check of a partial unique index (a false 23505), and VACUUM must remove
# every phantom, whatever row took its TID, so that pmhash_verify counts
# exactly the rows.
#
# An operating system crash may also lose the pages the cut-short rows
# extended the heap by, which PostgreSQL had not synced: their phantoms
# then point past the end of the heap.  Every scan must pass over them,
# also the bitmap scan of a parameter array, which reads the rows' keys
# itself (src/pmscan.c): no error, the rows a seqscan finds, and VACUUM
# removes them.  Run on the pmem path and on the msync path.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Nothing but the test's own commits may flush the WAL: the crash must
# catch the uncommitted rows' heap records unflushed and their pages unwritten.
my $CONF = <<'EOC';
wal_writer_delay = 10s
bgwriter_lru_maxpages = 0
checkpoint_timeout = 1h
max_wal_size = 4GB
EOC

# Keys present after the restart: (key, flag) of the rows a scan must find.
my $BASE = 10;

# Each probe by plain index scan and by bitmap scan, against a seqscan.
sub probe_all
{
	my ($node, $label) = @_;
	for my $scan ([ 'index', 'enable_bitmapscan = off' ], [ 'bitmap', 'enable_indexscan = off' ])
	{
		my ($name, $off) = @$scan;
		for my $query ("SELECT count(*) FROM ph WHERE k = %s AND flag",
			"SELECT count(*) FROM ph WHERE k + 0 = %s")
		{
			for my $key (500, 600, 601, 700, 701, 702, 1, 2)
			{
				my $sql = sprintf($query, $key);
				my $by_index = $node->safe_psql('postgres',
					"SET enable_seqscan = off; SET $off; $sql");
				my $by_seqscan = $node->safe_psql('postgres',
					"SET enable_indexscan = off; SET enable_bitmapscan = off; $sql");
				is($by_index, $by_seqscan, "$label: $name scan of \"$sql\"");
			}
		}
	}
	like($node->safe_psql('postgres',
			"SET enable_seqscan = off; SET enable_bitmapscan = off; "
			  . "EXPLAIN (COSTS OFF) SELECT * FROM ph WHERE k = 500 AND flag"),
		qr/Index Scan using ph_(flagged|unique) on ph/, "$label: a partial index serves the flagged probe");
	return;
}

# Probes, and pmhash_verify of each index counting exactly its rows.
sub check_after
{
	my ($node, $label) = @_;
	probe_all($node, $label);
	for my $index ([ 'ph_k', 'count(*)' ], [ 'ph_flagged', 'count(k) FILTER (WHERE flag)' ],
		[ 'ph_unique', 'count(k) FILTER (WHERE flag)' ], [ 'ph_kn', 'count(k)' ])
	{
		my ($name, $rows) = @$index;
		is($node->safe_psql('postgres', "SELECT pmhash_verify('$name') = (SELECT $rows FROM ph)"),
			't', "$label: pmhash_verify counts the rows of $name");
	}
	return;
}

for my $path ([ 'pmem', 'shm', 1 ], [ 'msync', 'data', 0 ])
{
	my ($label, $dir, $force) = @$path;
	my $node = new_node("phantoms_$label", dir => $dir, force => $force, conf => $CONF);
	start_node($node);
	$node->safe_psql('postgres', <<"EOS");
CREATE EXTENSION pmhash;
CREATE TABLE ph (k int8, flag bool, n int8, pad text) WITH (autovacuum_enabled = off);
INSERT INTO ph SELECT g, g % 3 > 0, nullif(g % 2, 1) FROM generate_series(1, $BASE) g;
CREATE INDEX ph_k ON ph USING pmhash ((k + 0)) WITH (shards = 1);
CREATE INDEX ph_flagged ON ph USING pmhash (k) WHERE flag;
CREATE UNIQUE INDEX ph_unique ON ph USING pmhash (k) WITH (shards = 1) WHERE flag;
CREATE INDEX ph_kn ON ph USING pmhash (k, n) WITH (shards = 1);
CHECKPOINT;
EOS

	# committed after the checkpoint: entries that recovery flags unverified
	# and VACUUM must confirm (a NULL in a later key column, a row outside
	# the predicates, a HOT update, a key update).  With one shard, every
	# entry shares the few buckets these change, so the entries of the rows
	# above, whose WAL lies before the checkpoint and is not replayed, are
	# flagged unverified too.
	$node->safe_psql('postgres', <<"EOS");
INSERT INTO ph VALUES (700, true, NULL), (701, false, 5);
UPDATE ph SET pad = 'hot' WHERE k = 1;
UPDATE ph SET k = 702 WHERE k = 2;
EOS

	# two rows whose transaction the crash cuts short, their entries in the files
	my $session = $node->background_psql('postgres');
	$session->query_safe("BEGIN; INSERT INTO ph VALUES (500, true, 1), (600, true, 1)");
	is($session->query_safe("SELECT string_agg(ctid::text, ' ' ORDER BY k) FROM ph WHERE k IN (500, 600)"),
		'(0,15) (0,16)', "$label: the cut-short rows lie at (0,15) and (0,16)");
	$node->stop('immediate');
	$session->{run}->kill_kill;
	start_node($node);

	# the first rows after the restart take the phantoms' TIDs
	$node->safe_psql('postgres', "INSERT INTO ph VALUES (500, false, 1), (601, true, 1)");
	is($node->safe_psql('postgres',
			"SELECT string_agg(ctid::text || '=' || k, ' ' ORDER BY k) FROM ph WHERE k IN (500, 601)"),
		'(0,15)=500 (0,16)=601', "$label: the new rows took the phantoms' TIDs");

	probe_all($node, "$label, after the restart");

	# a row of key 500 that the partial unique index holds does not conflict
	# with the unflagged row at the phantom's TID
	my ($rc, $out, $err) = $node->psql('postgres', "INSERT INTO ph VALUES (500, true)");
	is($err, '', "$label: a flagged row of key 500 inserts beside the unflagged one");
	($rc, $out, $err) = $node->psql('postgres', "INSERT INTO ph VALUES (500, true)");
	like($err, qr/duplicate key value violates unique constraint "ph_unique"/,
		"$label: a second flagged row of key 500 conflicts");

	# VACUUM removes the phantoms; a crash right after it replays that
	# removal, which must spare the entries of the rows now at those TIDs
	$node->safe_psql('postgres', "$VACUUM ph");
	check_after($node, "$label, after VACUUM");
	$node->stop('immediate');
	start_node($node);
	check_after($node, "$label, after VACUUM and a crash");
	$node->stop;
}

# Phantoms past the end of the heap: a transaction cut short by a crash
# extends the table (3 rows a page), then the heap file loses the pages it
# added, as an operating system crash may lose what was never synced.
sub phantoms_past_end
{
	my ($label, $dir, $force) = @_;
	my $node = new_node("past_end_$label", dir => $dir, force => $force, conf => $CONF);
	start_node($node);
	$node->safe_psql('postgres', <<"EOS");
CREATE EXTENSION IF NOT EXISTS pmhash;
CREATE TABLE pe (k int8, pad text) WITH (autovacuum_enabled = off, fillfactor = 10);
INSERT INTO pe SELECT g, repeat('x', 200) FROM generate_series(1, 10) g;
CREATE INDEX pe_k ON pe USING pmhash (k);
CHECKPOINT;
EOS
	my $blocks = $node->safe_psql('postgres', "SELECT pg_relation_size('pe') / 8192");
	my $file = $node->data_dir . '/' . $node->safe_psql('postgres', "SELECT pg_relation_filepath('pe')");
	my $session = $node->background_psql('postgres');
	$session->query_safe("BEGIN; INSERT INTO pe SELECT g, repeat('x', 200) FROM generate_series(101, 130) g");
	ok($session->query_safe("SELECT max((ctid::text::point)[0]) FROM pe") >= $blocks + 5,
		"$label: the cut-short rows extend the heap");
	$node->stop('immediate');
	$session->{run}->kill_kill;
	truncate($file, $blocks * 8192) or die "could not truncate $file: $!";
	start_node($node);

	my $keys = "'{1,5,10,101,102,110,120,130,999}'";
	my $want = $node->safe_psql('postgres',
		"SET enable_indexscan = off; SET enable_bitmapscan = off; "
		  . "SELECT count(*) FROM pe WHERE k = ANY(${keys}::int8[])");
	is($want, '3', "$label: the seqscan finds the rows that survived");
	for my $scan ([ 'index', 'enable_bitmapscan = off' ], [ 'bitmap', 'enable_indexscan = off' ])
	{
		my ($name, $off) = @$scan;
		my ($rc, $out, $err) = $node->psql('postgres',
			"SET enable_seqscan = off; SET $off; SET plan_cache_mode = force_generic_plan; "
			  . "PREPARE q(int8[]) AS SELECT count(*) FROM pe WHERE k = ANY(\$1); EXECUTE q($keys)");
		is("$out$err", $want, "$label: $name scan of a parameter array");
		($rc, $out, $err) = $node->psql('postgres',
			"SET enable_seqscan = off; SET $off; SELECT count(*) FROM pe WHERE k = ANY(${keys}::int8[])");
		is("$out$err", $want, "$label: $name scan of a constant array");
		($rc, $out, $err) = $node->psql('postgres',
			"SET enable_seqscan = off; SET $off; SELECT count(*) FROM pe WHERE k = 120");
		is("$out$err", '0', "$label: $name scan of a lost row's key");
	}
	$node->safe_psql('postgres', "$VACUUM pe");
	is($node->safe_psql('postgres', "SELECT pmhash_verify('pe_k') = (SELECT count(*) FROM pe)"),
		't', "$label: after VACUUM, pmhash_verify counts the rows");
	$node->stop;
	return;
}

phantoms_past_end('pmem', 'shm', 1);
phantoms_past_end('msync', 'data', 0);

done_testing();
