# Dead entries removed by index scans, replayed on a hot standby.
#
# An index scan on the primary removes the entries of rows it finds dead to
# every transaction and logs them (KILL) with the newest transaction that
# deleted one of them.  A standby query whose snapshot still sees those
# rows must not go on without them: replay of KILL cancels it first (a
# conflict with recovery, max_standby_streaming_delay = 0), as replay of
# hash's VACUUM_ONE_PAGE does.  The heap pages hold 5 rows each and keep
# enough free space that the primary never prunes them, so the KILL record
# is the only one that can raise the conflict.  Then the standby's index
# holds what the primary's does, and its scans agree with a seqscan.  Last,
# removals of the entries of rows that die while their transaction goes on
# (its subtransaction rolled back; a speculative insertion undone by a
# conflict in another index): replay must not bring the entries back.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use IPC::Run ();
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $ROWS = 1000;
my $KEYS = 50;
my $KEY = 7;
my $PER_KEY = $ROWS / $KEYS;

my $primary = new_node('primary', init => { allows_streaming => 1 });
start_node($primary);
$primary->safe_psql('postgres', <<"EOS");
CREATE EXTENSION pmhash;
CREATE TABLE dk (id int, k int8, pad text) WITH (autovacuum_enabled = off);
INSERT INTO dk SELECT g, g % $KEYS, repeat('x', 1352) FROM generate_series(1, $ROWS) g;
CREATE INDEX dk_k ON dk USING pmhash (k);
EOS
is($primary->safe_psql('postgres', "SELECT count(DISTINCT (ctid::text::point)[0]) FROM dk"),
	$ROWS / 5, 'the heap holds 5 rows per page');

$primary->backup('base');
my $standby = new_node_from_backup('standby', $primary, 'base',
	restore => { has_streaming => 1 },
	conf => "max_standby_streaming_delay = 0\n");
start_node($standby);
$primary->wait_for_catchup($standby);

# a standby query holding a snapshot that sees the rows of k = 7
my $index_count = "SET enable_seqscan = off; SET enable_bitmapscan = off; "
  . "SELECT count(*) FROM dk WHERE k = $KEY;";
my ($out, $err) = ('', '');
my $reader = IPC::Run::start(
	[ 'psql', '-X', '-At', '-d', $standby->connstr('postgres'), '-c',
		"BEGIN ISOLATION LEVEL REPEATABLE READ; $index_count SELECT pg_sleep(60); "
		  . "$index_count COMMIT;" ],
	'>', \$out, '2>', \$err);
ok( wait_until(30,
		sub {
			$standby->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' "
				  . "AND wait_event = 'PgSleep'") eq '1';
		}),
	'the standby query holds its snapshot');

# the primary deletes the rows, and an index scan removes their entries
$primary->safe_psql('postgres', "DELETE FROM dk WHERE k = $KEY");
is($primary->safe_psql('postgres', $index_count), '0', 'the primary finds no row of the key');
is($primary->safe_psql('postgres', "SELECT entries FROM pmhash_stats('dk_k')"),
	$ROWS - $PER_KEY, "the primary's scan removed the $PER_KEY dead entries");
$primary->wait_for_catchup($standby);
$reader->finish;
my @counts = $out =~ /^(\d+)$/mg;
is($counts[0], $PER_KEY, "the standby query saw the $PER_KEY rows first");
like($err, qr/canceling statement due to conflict with recovery/,
	'replay of the removal canceled the standby query that could still see the rows');
is(join(' ', grep { $_ ne $PER_KEY } @counts), '',
	'the standby query never saw the rows vanish from its snapshot');
cmp_ok($standby->safe_psql('postgres',
		"SELECT confl_snapshot FROM pg_stat_database_conflicts WHERE datname = 'postgres'"),
	'>=', 1, 'the standby counts a snapshot conflict');

# the standby's index now matches the primary's
is($standby->safe_psql('postgres', "SELECT entries FROM pmhash_stats('dk_k')"),
	$ROWS - $PER_KEY, 'the standby replayed the removal');
my $sql = <<"EOQ";
SELECT md5(string_agg(g || ':' || c, ' ' ORDER BY g))
FROM generate_series(0, $KEYS - 1) g, LATERAL (SELECT count(*) AS c FROM dk WHERE k = g) x
EOQ
my $seq = $standby->safe_psql('postgres',
	"SET enable_indexscan = off; SET enable_bitmapscan = off; $sql");
for my $kind ([ 'index', 'SET enable_seqscan = off; SET enable_bitmapscan = off;' ],
	[ 'bitmap', 'SET enable_seqscan = off; SET enable_indexscan = off;' ])
{
	is($standby->safe_psql('postgres', "$kind->[1] $sql"), $seq,
		"standby: $kind->[0] scans of every key agree with a seqscan");
	is($primary->safe_psql('postgres', "$kind->[1] $sql"), $seq,
		"primary: $kind->[0] scans of every key agree with the standby's seqscan");
}
is($standby->safe_psql('postgres', "SELECT pmhash_verify('dk_k')"),
	$ROWS - $PER_KEY, 'pmhash_verify passes on the standby');

# A row inserted in a subtransaction that rolled back is dead to every
# transaction while its transaction goes on.  An index scan removes its
# entry then, and logs the removal; the transaction's INSERT record comes
# at its commit and must not hold that entry, or replay (on the standby,
# and in crash recovery) would add it back after the removal.
my $entries = "SELECT entries FROM pmhash_stats('dk_k')";
my $session = $primary->background_psql('postgres');
$session->query_safe("BEGIN; SAVEPOINT a; INSERT INTO dk VALUES (5001, 999, 'gone'); "
	  . "ROLLBACK TO a; INSERT INTO dk VALUES (5002, 998, 'kept');");
is($primary->safe_psql('postgres',
		"SET enable_seqscan = off; SET enable_bitmapscan = off; "
		  . "SELECT count(*) FROM dk WHERE k = 999"),
	'0', 'the rolled back row is not found');
is($primary->safe_psql('postgres', $entries), $ROWS - $PER_KEY + 1,
	"the scan removed the rolled back row's entry, the open transaction's other entry stays");
$session->query_safe('COMMIT');
$session->quit;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $entries), $ROWS - $PER_KEY + 1,
	"the standby's index holds what the primary's does: the rolled back row's entry did not come back");
$primary->stop('immediate');
start_node($primary);
is($primary->safe_psql('postgres', $entries), $ROWS - $PER_KEY + 1,
	"after crash recovery the primary's index holds the same entries");
is($primary->safe_psql('postgres', "SELECT pmhash_verify('dk_k')"),
	$primary->safe_psql('postgres', "SELECT count(k) FROM dk"),
	'pmhash_verify on the recovered primary counts exactly the rows');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', "SELECT pmhash_verify('dk_k')"),
	$standby->safe_psql('postgres', "SELECT count(k) FROM dk"),
	'pmhash_verify on the standby counts exactly the rows');

# A speculative insertion undone by a conflict in another index: sp_k, a
# plain pmhash index, gets the row's entry first; then the unique btree
# arbiter on sp_gate(id), whose second call in the transaction waits for an
# advisory lock, finds the row another session inserted and committed
# meanwhile, and the executor takes the row back (dead to every
# transaction) while its transaction goes on.  An index scan removes the
# entry and logs the removal before the transaction's commit: the entry
# must have been logged already, or replay would add it back after the
# removal, on the standby and in crash recovery.
$primary->safe_psql('postgres', <<'EOS');
CREATE TABLE sp (id int8, k int8) WITH (autovacuum_enabled = off);
CREATE INDEX sp_k ON sp USING pmhash (k);
CREATE FUNCTION sp_gate(int8) RETURNS int8 IMMUTABLE LANGUAGE plpgsql AS $$
DECLARE
  calls int := coalesce(nullif(current_setting('sp.calls', true), ''), '0')::int + 1;
BEGIN
  PERFORM set_config('sp.calls', calls::text, true);
  IF calls = 2 AND current_setting('sp.wait', true) = 'on' THEN
    PERFORM pg_advisory_lock_shared(4712);
    PERFORM pg_advisory_unlock_shared(4712);
  END IF;
  RETURN $1;
END $$;
CREATE UNIQUE INDEX sp_id ON sp (sp_gate(id));
EOS
my $sp_entries = "SELECT entries FROM pmhash_stats('sp_k')";
my $controller = $primary->background_psql('postgres');
$controller->query_safe('SELECT pg_advisory_lock(4712)');
my $upsert = $primary->background_psql('postgres');
$upsert->query_safe("BEGIN; SET LOCAL sp.wait = on;");
$upsert->query_until(qr/started/,
	"\\echo started\nINSERT INTO sp VALUES (1, 77) ON CONFLICT (sp_gate(id)) DO NOTHING;\n");
ok( wait_until(30,
		sub {
			$primary->safe_psql('postgres',
				"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") eq '1';
		}),
	'the upsert waits between its entry in sp_k and its arbiter check');
$primary->safe_psql('postgres', 'INSERT INTO sp VALUES (1, 88)');
$controller->query_safe('SELECT pg_advisory_unlock(4712)');
is($upsert->query_safe('SELECT count(*) FROM sp WHERE id = 1'), '1',
	'the upsert found the conflict and took its row back');
is($primary->safe_psql('postgres', $sp_entries), '2', 'sp_k holds the entry of the undone row');
is($primary->safe_psql('postgres',
		"SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM sp WHERE k = 77"),
	'0', 'the undone row is not found');
is($primary->safe_psql('postgres', $sp_entries), '1', "the scan removed the undone row's entry");
$upsert->query_safe('COMMIT');
$upsert->quit;
$controller->quit;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $sp_entries), '1',
	"the standby's sp_k holds what the primary's does: the undone row's entry did not come back");
$primary->stop('immediate');
start_node($primary);
is($primary->safe_psql('postgres', "SELECT pmhash_verify('sp_k')"), '1',
	'pmhash_verify on the recovered primary counts exactly the rows of sp');

$standby->stop;
$primary->stop;
done_testing();
