# pmhash indexes on a hot standby built from a base backup taken under load.
#
# The primary (wal_level replica, index files in its data directory, data
# checksums, so that the files keep bucket checksums) runs a pgbench
# workload of inserts, deletes, updates, probes, VACUUM and CHECKPOINT on
# table rt while pg_basebackup copies it, so the standby starts from fuzzy
# copies of the index files, whose torn buckets it must reseal, not
# report.  While the load goes on, the primary grows rt in bulk, deletes a
# large part of it, creates an index and REINDEXes one (both in several
# batches of a small maintenance_work_mem), drops one, truncates a table,
# moves an index to another tablespace (its file is copied and the COPY
# replayed), and creates databases from a template holding a pmhash index
# (WAL_LOG and FILE_COPY strategies), then goes on with rounds of bulk
# inserts, deletes, VACUUM and REINDEX.  Meanwhile pgbench on the standby
# compares, inside REPEATABLE READ transactions, the index scan, the bitmap
# scan and the seqscan of random keys: they must never differ or fail.
# The primary keeps 1GB of WAL (its rounds checkpoint often), so that a
# standby slowed by a busy machine does not lose its stream.  Once replay has
# caught up, every key of every index must give on the standby what its
# seqscan gives and what the primary gives, and pmhash_verify must count
# the non-null keys.  Finally the standby is promoted: its indexes take
# inserts, deletes and VACUUM, stay correct and pass pmhash_verify.  The
# server logs must show no error and no crash.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $scripts = workload_scripts();
my @LOAD = map { "$scripts->{$_->[0]}\@$_->[1]" } [ insert => 5 ], [ delete => 2 ],
  [ update => 2 ], [ probe => 1 ];
my @SIDE = ([ 'side_k', 'side', 'k', '-g' ]);
my @TP = ([ 'tp_k', 'tp', 'k', '-g' ]);
my @RT_ALL = (@RT_INDEXES, [ 'rt_n', 'rt', 'n', '-g' ]);
my %INDEXES_OF = (postgres => [ @RT_ALL, @SIDE ], map { $_ => \@TP } qw(tmpl copy_wal copy_file));

# Run SQL on the primary and check that it succeeds.
sub primary_ok
{
	my ($node, $db, $sql, $name) = @_;
	my ($rc, $out, $err) = $node->psql($db, $sql);
	is($rc, 0, "primary: $name") or diag $err;
	return;
}

# Check every index of every database on a node; returns db => digests.
sub check_all
{
	my ($node, $name, $exact) = @_;
	my %digests;
	for my $db (sort keys %INDEXES_OF)
	{
		$digests{$db} = check_indexes($node, $db, "$name, $db", @{ $INDEXES_OF{$db} });
		check_verify($node, $db, "$name, $db", $exact, @{ $INDEXES_OF{$db} });
	}
	return \%digests;
}

# Number of transactions a pgbench run reports.
sub transactions
{
	my ($out) = @_;
	return $out =~ /number of transactions actually processed: (\d+)/ ? $1 : 0;
}

############################################################################
# Primary under load; base backup during the load; hot standby.
############################################################################

my $primary = new_node('primary', dir => 'data',
	init => { allows_streaming => 1, extra => ['--data-checksums'] },
	conf => "wal_keep_size = '1GB'\n");
start_node($primary);
create_workload_table($primary, 'postgres', 20000);
$primary->safe_psql('postgres', <<'EOS');
CREATE TABLE side (id int, k int);
INSERT INTO side SELECT i, i % 500 FROM generate_series(1, 5000) i;
CREATE INDEX side_k ON side USING pmhash (k) WITH (shards = 2);
CREATE INDEX side_id ON side USING pmhash (id);
EOS

my @load = (
	start_pgbench($primary, 'postgres', clients => 3, seconds => 35, rate => 200,
		scripts => \@LOAD),
	start_pgbench($primary, 'postgres', clients => 1, seconds => 35,
		scripts => [ $scripts->{maint} ]));
sleep 3;
$primary->backup('under_load');
my $standby = new_node_from_backup('standby', $primary, 'under_load',
	restore => { has_streaming => 1 },
	conf => "max_standby_streaming_delay = -1\n"
	  . "hot_standby_feedback = on\nwal_receiver_status_interval = 1s\n");
my @copied = pmh_files($standby);
cmp_ok(scalar(@copied), '>=', 4, 'the base backup holds copies of the index files');
start_node($standby);

# Replay waits for as long as a probe needs (no cancellations), so it must
# never wait for a probe's snapshot: a probe waiting for a lock that replay
# holds would then wait forever, a deadlock PostgreSQL does not detect.
# The primary keeps the rows the standby's snapshots see (feedback), and
# the probes start once the WAL written before the first feedback (the
# load during the base backup) is replayed.
$primary->wait_for_catchup($standby);
sleep 2;
my $probes = start_pgbench($standby, 'postgres', clients => 2, seconds => 25,
	scripts => [ $scripts->{standby} ]);
my $probes_end = time + 25;

############################################################################
# Heavy redo: growth, deletions and DDL on the primary, under the load.
############################################################################

primary_ok($primary, 'postgres',
	'INSERT INTO rt (k, t) SELECT rt_key(), rt_t(rt_key()) FROM generate_series(1, 40000)',
	'bulk growth of rt');
# in several batches (43,690 entries each), spilled to temporary files
primary_ok($primary, 'postgres',
	"SET maintenance_work_mem = '1MB'; CREATE INDEX rt_n ON rt USING pmhash (n) WITH (shards = 2)",
	'CREATE INDEX rt_n in batches');
primary_ok($primary, 'postgres', 'DELETE FROM rt WHERE id % 5 = 0; VACUUM rt',
	'delete a fifth of rt and VACUUM');
primary_ok($primary, 'postgres', "SET maintenance_work_mem = '1MB'; REINDEX INDEX rt_t",
	'REINDEX INDEX rt_t in batches');
primary_ok($primary, 'postgres', 'DROP INDEX side_id', 'DROP INDEX side_id');
primary_ok($primary, 'postgres',
	'TRUNCATE side; INSERT INTO side SELECT i, i % 500 FROM generate_series(1, 8000) i',
	'TRUNCATE side and refill it');
primary_ok($primary, 'postgres',
	    "SET allow_in_place_tablespaces = on; CREATE TABLESPACE ts LOCATION '';\n"
	  . 'ALTER INDEX side_k SET TABLESPACE ts; '
	  . 'INSERT INTO side SELECT i, i % 500 FROM generate_series(8001, 9000) i',
	'ALTER INDEX side_k SET TABLESPACE, then inserts');
primary_ok($primary, 'postgres', 'CREATE DATABASE tmpl', 'CREATE DATABASE tmpl');
primary_ok($primary, 'tmpl',
	    'CREATE EXTENSION pmhash; CREATE TABLE tp (id int, k int); '
	  . 'INSERT INTO tp SELECT i, i % 300 FROM generate_series(1, 6000) i; '
	  . 'CREATE INDEX tp_k ON tp USING pmhash (k) WITH (shards = 2)',
	'a pmhash index in database tmpl');
primary_ok($primary, 'postgres',
	    "CREATE DATABASE copy_wal TEMPLATE tmpl STRATEGY WAL_LOG;\n"
	  . 'CREATE DATABASE copy_file TEMPLATE tmpl STRATEGY FILE_COPY',
	'CREATE DATABASE from template tmpl, both strategies');
for my $db (qw(copy_wal copy_file))
{
	primary_ok($primary, $db,
		'INSERT INTO tp SELECT i, i % 300 FROM generate_series(6001, 9000) i; '
		  . "DELETE FROM tp WHERE id % 4 = 0; $VACUUM tp",
		"changes to the copied index in $db");
}

# more rounds of heavy redo while the standby probes run
my $round = 0;
while (time < $probes_end - 3)
{
	$round++;
	primary_ok($primary, 'postgres',
		    'INSERT INTO rt (k, t) SELECT rt_key(), rt_t(rt_key()) FROM generate_series(1, 8000); '
		  . "DELETE FROM rt WHERE id % 9 = $round % 9; VACUUM rt; "
		  . "UPDATE side SET k = (k + 1) % 500 WHERE id % 10 = $round % 10; "
		  . ($round % 2 ? 'REINDEX INDEX rt_k' : 'REINDEX INDEX side_k'),
		"heavy redo round $round");
}
cmp_ok($round, '>', 0, 'heavy redo rounds ran while the standby probes ran');

for my $run (@load)
{
	my ($rc, $out) = finish_pgbench($run);
	is($rc, 0, 'the primary workload succeeded') or diag $out;
}
my ($probe_rc, $probe_out) = finish_pgbench($probes);
is($probe_rc, 0, 'standby probes: index, bitmap and seqscan never differed nor failed')
  or diag $probe_out;
note 'standby probes: ' . transactions($probe_out) . ' transactions';
cmp_ok(transactions($probe_out), '>', 0, 'standby probes ran');

############################################################################
# After catch-up: the standby agrees with its seqscans and with the primary.
############################################################################

# without the standby's feedback, VACUUM removes every dead row again
$standby->safe_psql('postgres',
	'ALTER SYSTEM SET hot_standby_feedback = off; SELECT pg_reload_conf()');
$primary->poll_query_until('postgres',
	"SELECT count(*) = 1 AND bool_and(backend_xmin IS NULL) FROM pg_stat_replication")
  or BAIL_OUT('the standby still holds back the primary\'s xmin');
primary_ok($primary, 'postgres', "$VACUUM rt; $VACUUM side", 'final VACUUM');
primary_ok($primary, $_, "$VACUUM tp", "final VACUUM in $_") for qw(copy_wal copy_file);
$primary->wait_for_catchup($standby);
my $on_primary = check_all($primary, 'primary', 1);
my $on_standby = check_all($standby, 'standby', 1);
is_deeply($on_standby, $on_primary, 'the standby finds for every key what the primary finds');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM rt'),
	$primary->safe_psql('postgres', 'SELECT count(*) FROM rt'), 'the standby has all rows of rt');
my $log = check_log($standby, 0, 'standby before promotion');
note $_ for $log =~ /(pmhash: [^\n]*)/g;

############################################################################
# Promotion: the indexes take writes and stay right.
############################################################################

$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', 'the standby is promoted');
my ($rc, $out, $err) = $standby->psql('postgres',
	    'INSERT INTO rt (k, t) SELECT rt_key(), rt_t(rt_key()) FROM generate_series(1, 5000); '
	  . 'UPDATE rt SET k = rt_key() WHERE id % 13 = 0; DELETE FROM rt WHERE id % 11 = 0; '
	  . 'INSERT INTO side SELECT i, i % 500 FROM generate_series(9001, 9500) i; '
	  . "$VACUUM rt; $VACUUM side;");
is($rc, 0, 'promoted: inserts, updates, deletes and VACUUM succeed') or diag $err;
for my $db (qw(copy_wal copy_file))
{
	($rc, $out, $err) = $standby->psql($db,
		"INSERT INTO tp SELECT i, i % 300 FROM generate_series(9001, 9500) i; $VACUUM tp");
	is($rc, 0, "promoted: writes to $db succeed") or diag $err;
}
check_all($standby, 'promoted', 1);
$log = check_log($standby, 0, 'standby after promotion');
note $_ for $log =~ /(pmhash index [^\n]*was rebuilt[^\n]*)/g;
check_log($primary, 0, 'primary');

$standby->stop;
$primary->stop;
done_testing();
