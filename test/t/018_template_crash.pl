# CREATE DATABASE ... TEMPLATE and ALTER INDEX ... SET TABLESPACE replayed
# after a crash, as they were when they ran.
#
# Core copies the main fork of an index; pmhash copies the index file and
# logs the copy (src/pmutility.c).  Crash recovery and standbys replay that
# log at its position in the WAL, when the source file may already hold
# later changes.  For each persistence path (files on /dev/shm with
# PMEM_IS_PMEM_FORCE=1, files in the data directory with msync) and each
# CREATE DATABASE strategy (FILE_COPY, WAL_LOG) and a tablespace move: make
# the copy after a checkpoint, then change the source (delete every row and
# VACUUM, insert other rows, which reuse the freed TIDs under other keys),
# stop the server immediately and start it.  The copy must answer every key
# by index and bitmap scan as a seqscan does, pmhash_verify must count its
# non-null keys, and its unique pmhash index must refuse a duplicate; the
# source too.  A standby replays the same copies and must agree.  A hash
# index on a twin table goes through the same steps and is checked the
# same way: where it answers, pmhash must too.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles qw(compare_with_seqscan run_sql);
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $ROWS = 1000;
my $KEYS = 50;

# Create table t (id, k) with pmhash indexes: t_k on k, unique t_id on id;
# and table h, the same rows with a hash index h_k on k, which goes through
# the same steps: where it answers, pmhash must too.
sub make_source
{
	my ($node, $db) = @_;
	$node->safe_psql($db,
		    "CREATE TABLE t (id int, k int); "
		  . "INSERT INTO t SELECT i, i % $KEYS FROM generate_series(1, $ROWS) i; "
		  . "CREATE INDEX t_k ON t USING pmhash (k); "
		  . "CREATE UNIQUE INDEX t_id ON t USING pmhash (id); "
		  . "CREATE TABLE h AS SELECT * FROM t; CREATE INDEX h_k ON h USING hash (k);");
	return;
}

# Wait until the syncer's durable position (its replication slot) passes the
# current WAL position, so that crash recovery replays from the redo point
# of the next checkpoint, not from before the source was made.
sub wait_for_durable
{
	my ($node, $name) = @_;
	my $lsn = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	# a round that synced nothing moves it once it lags a WAL segment
	ok( wait_until(60, sub {
				$node->safe_psql('postgres',
					"SELECT pg_logical_emit_message(false, 'pmhash', 'test'), pg_switch_wal()");
				$node->safe_psql('postgres',
					"SELECT restart_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = 'pmhash_durable'"
				) eq 't';
			}),
		"$name: the syncer's durable position passed the source's creation");
	return;
}

# Change the source after the copy: its rows go, others take their TIDs.
sub change_source
{
	my ($node, $db, @tables) = @_;
	for my $table (@tables)
	{
		$node->safe_psql($db, "DELETE FROM $table; $VACUUM $table");
		$node->safe_psql($db,
			"INSERT INTO $table SELECT i, (i + 7) % $KEYS FROM generate_series($ROWS + 1, 2 * $ROWS) i");
	}
	return;
}

# Check the indexes of a table against a seqscan, pmhash_verify, and the
# unique index against a duplicate of an existing id.
sub check_table
{
	my ($node, $db, $table, $name) = @_;
	compare_with_seqscan($node, $db, "${table}_k", $table, 'k', -1, $KEYS + 1, "$name, k");
	compare_with_seqscan($node, $db, "${table}_id", $table, 'id', 0, 2 * $ROWS + 1, "$name, id");
	compare_with_seqscan($node, $db, 'h_k', 'h', 'k', -1, $KEYS + 1, "$name, hash k")
	  if $table eq 't';
	for my $index ("${table}_k", "${table}_id")
	{
		is($node->safe_psql($db, "SELECT pmhash_verify('$index')"),
			$node->safe_psql($db, "SELECT count(*) FROM $table"),
			"$name: pmhash_verify('$index') counts the table's rows");
	}
	return if $node->safe_psql('postgres', 'SELECT pg_is_in_recovery()') eq 't';
	my $id = $node->safe_psql($db, "SELECT min(id) FROM $table");
	my ($rc, $out, $err) = run_sql($node, $db, "INSERT INTO $table VALUES ($id, 0)");
	like($err, qr/23505: duplicate key value violates unique constraint "${table}_id"/,
		"$name: the unique index refuses a duplicate id");
	return;
}

for my $path ([ 'pmem', 'shm', 1 ], [ 'msync', 'data', 0 ])
{
	my ($mode, $dir, $force) = @$path;
	my $node = new_node("primary_$mode", dir => $dir, force => $force,
		init => { allows_streaming => 1 },
		# keep the WAL a standby that reconnects may ask for again
		conf => "allow_in_place_tablespaces = on\nwal_keep_size = 512MB\n");
	start_node($node);
	$node->safe_psql('postgres', 'CREATE EXTENSION pmhash');
	$node->safe_psql('postgres', "CREATE TABLESPACE ts LOCATION ''");
	$node->backup('base');
	my $standby = new_node_from_backup("standby_$mode", $node, 'base', dir => $dir,
		force => $force, restore => { has_streaming => 1 });
	start_node($standby);

	for my $strategy ('file_copy', 'wal_log')
	{
		my $name = "$mode, CREATE DATABASE STRATEGY $strategy";
		my $offset = log_offset($node);
		$node->safe_psql('postgres', "CREATE DATABASE src_$strategy");
		$node->safe_psql("src_$strategy", 'CREATE EXTENSION pmhash');
		make_source($node, "src_$strategy");
		wait_for_durable($node, $name);
		$node->safe_psql('postgres', 'CHECKPOINT');
		$node->safe_psql('postgres',
			"CREATE DATABASE copy_$strategy TEMPLATE src_$strategy STRATEGY $strategy");
		change_source($node, "src_$strategy", 't', 'h');
		$node->stop('immediate');
		start_node($node);
		like(slurp_file($node->logfile, $offset), qr/redo starts at/,
			"$name: crash recovery replayed the copy");
		check_table($node, "copy_$strategy", 't', "$name, the copy after a crash");
		check_table($node, "src_$strategy", 't', "$name, the template after a crash");
		check_log($node, $offset, $name, qr/duplicate key value/);
	}

	{
		my $name = "$mode, ALTER INDEX SET TABLESPACE";
		my $offset = log_offset($node);
		$node->safe_psql('postgres',
			    "CREATE TABLE mv (id int, k int); "
			  . "INSERT INTO mv SELECT i, i % $KEYS FROM generate_series(1, $ROWS) i; "
			  . "CREATE INDEX mv_k ON mv USING pmhash (k); "
			  . "CREATE UNIQUE INDEX mv_id ON mv USING pmhash (id)");
		wait_for_durable($node, $name);
		$node->safe_psql('postgres', 'CHECKPOINT');
		$node->safe_psql('postgres', 'ALTER INDEX mv_k SET TABLESPACE ts');
		change_source($node, 'postgres', 'mv');
		$node->stop('immediate');
		start_node($node);
		check_table($node, 'postgres', 'mv', "$name, after a crash");
		unlike(slurp_file($node->logfile, $offset), qr/will be rebuilt/,
			"$name: recovery rebuilds nothing");
		check_log($node, $offset, $name, qr/duplicate key value/);
	}

	$node->wait_for_catchup($standby, 'replay', $node->lsn('insert'));
	for my $db ('copy_file_copy', 'copy_wal_log', 'src_wal_log')
	{
		check_table($standby, $db, 't', "$mode, standby, $db");
	}
	check_table($standby, 'postgres', 'mv', "$mode, standby, mv");
	$standby->stop;
	$node->stop;
}

done_testing();
