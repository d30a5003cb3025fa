# A crash part way through a rebuild of an index from its table.
#
# An index whose file recovery left to be rebuilt is rebuilt from its table
# by its first use, outside any transaction: an abort does not undo it.
# Here the server stops (immediate shutdown) while such a rebuild runs, with
# a small maintenance_work_mem so that the rebuild writes and WAL-logs the
# file batch by batch: replay after the restart then recreates a file that
# holds only the shards logged before the stop.  That file must not be used
# as if whole: the index's first use after the restart rebuilds it again
# (with its LOG line), its index and bitmap scans find for every key what a
# seqscan finds, and pmhash_verify and pmhash_stats count every row.  A
# streaming standby follows the primary through the stopped rebuild, the
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
	$primary->safe_psql('postgres', <<"EOS");
CREATE EXTENSION pmhash;
CREATE TABLE rb (id int8, k int8);
INSERT INTO rb SELECT g, g % $KEYS FROM generate_series(1, $ROWS) g;
CREATE INDEX rb_k ON rb USING pmhash (k);
EOS
	$primary->backup('base');
	my $standby = new_node_from_backup("standby_$path_name", $primary, 'base',
		dir => $dir, force => $force, restore => { has_streaming => 1 });
	start_node($standby);
	$primary->wait_for_catchup($standby);

	# mark the file to be rebuilt, as recovery does when it cannot replay it
	my $file = index_path($primary, 'postgres', 'rb_k');
	$primary->stop;
	change_byte($file, $STATE_OFFSET, sub { $_[0] | $NEEDS_REBUILD });
	start_node($primary);

	# the first use rebuilds the index; stop the server while it runs
	my ($out, $err) = ('', '');
	my $probe = IPC::Run::start(
		[ 'psql', '-X', '-d', $primary->connstr('postgres'), '-c',
			"SET maintenance_work_mem = '1MB'; $FORCE_INDEX SELECT count(*) FROM rb WHERE k = 1" ],
		'>', \$out, '2>', \$err);
	my $lock_sql = "SELECT count(*) FROM pg_locks WHERE relation = 'rb_k'::regclass "
	  . "AND mode = 'AccessExclusiveLock' AND granted";
	ok(wait_until(60, sub { $primary->safe_psql('postgres', $lock_sql) eq '1' }),
		"$path_name: the first use of the index rebuilds it from the table");
	my $wal_start = $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	ok( wait_until(60,
			sub {
				$primary->safe_psql('postgres',
					"SELECT pg_current_wal_insert_lsn() - '$wal_start' > 4000000") eq 't';
			}),
		"$path_name: the rebuild writes WAL");
	my $still = $primary->safe_psql('postgres', $lock_sql);
	$primary->stop('immediate');
	$probe->finish;
	is($still, '1', "$path_name: the server stops while the rebuild runs");
	unlike(slurp_file($primary->logfile), qr/pmhash index "rb_k" was rebuilt/,
		"$path_name: the rebuild had not finished");

	my $offset = log_offset($primary);
	start_node($primary);
	check_answers($primary, "$path_name, after the crash");
	like(slurp_file($primary->logfile, $offset), qr/pmhash index "rb_k" was rebuilt from table "rb"/,
		"$path_name: the first use after the crash rebuilt the index again");
	check_log($primary, $offset, "$path_name, after the crash");

	$primary->wait_for_catchup($standby);
	check_answers($standby, "$path_name, standby");
	$standby->stop;
	$primary->stop;
}

done_testing();
