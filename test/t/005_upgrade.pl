# pg_upgrade of a cluster with pmhash indexes (PostgreSQL 15 to 15, which
# pg_upgrade supports; relfilenodes and database OIDs are kept).
#
# pg_upgrade carries the metapages but not pmhash.directory.  Without the
# files, a query through an index must fail with a REINDEX hint, not crash
# and not answer wrongly; REINDEX repairs an index.  Copying the old
# cluster's pmhash.directory into the new one (what the README says to do)
# makes every index answer what the old cluster answered and pass
# pmhash_verify.
use strict;
use warnings;

use File::Copy qw(copy);
use FindBin;
use lib $FindBin::RealBin;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @SPECS = ([ 'u_k', 'u', 'k', '-g' ], [ 'u_t', 'u', 't', "'absent' || g" ]);

my $old = new_node('old', dir => 'data');
start_node($old);
$old->safe_psql('postgres', <<'EOS');
CREATE EXTENSION pmhash;
CREATE TABLE u (id int, k int8, t text);
INSERT INTO u SELECT i, i % 700, 'v' || (i % 900) FROM generate_series(1, 20000) i;
CREATE INDEX u_k ON u USING pmhash (k);
CREATE INDEX u_t ON u USING pmhash (t);
DELETE FROM u WHERE id % 7 = 0;
VACUUM (INDEX_CLEANUP ON) u;
EOS
my $expected = check_indexes($old, 'postgres', 'old cluster', @SPECS);
my @old_files = pmh_files($old);
is(scalar(@old_files), 2, 'the old cluster has the two index files');
$old->stop;

my $new = new_node('new', dir => 'data');
my $bindir = $old->config_data('--bindir');
my $workdir = PostgreSQL::Test::Utils::tempdir();
chdir $workdir or die "chdir $workdir: $!";
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir,
		'-D', $new->data_dir,
		'-b', $bindir,
		'-B', $bindir,
		'-s', $new->host,
		'-p', $old->port,
		'-P', $new->port
	],
	'pg_upgrade succeeds');
start_node($new);

# Without the old files: an error naming the index, with a REINDEX hint.
for my $spec (@SPECS)
{
	my ($index, $table, $col) = @$spec;
	my ($rc, $out, $err) = $new->psql('postgres',
		"SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM $table WHERE $col = (SELECT $col FROM $table WHERE $col IS NOT NULL LIMIT 1)");
	isnt($rc, 0, "$index without its file: the query fails");
	like($err, qr/ERROR:  pmhash index "\Q$index\E" is damaged/, "$index without its file: names the index");
	like($err, qr/HINT:  Rebuild the index with REINDEX INDEX \Q$index\E\./,
		"$index without its file: hints at REINDEX");
}

# REINDEX repairs one index.
$new->safe_psql('postgres', 'REINDEX INDEX u_t');
my $after_reindex = check_indexes($new, 'postgres', 'new cluster, u_t reindexed', $SPECS[1]);
is($after_reindex->{u_t}, $expected->{u_t}, 'u_t after REINDEX answers what the old cluster answered');

# Copying the old directory makes the other index work as it was.
$new->stop;
for my $file (@old_files)
{
	copy(pmhash_dir($old) . "/$file", pmhash_dir($new) . "/$file") or die "copy $file: $!";
}
start_node($new);
is_deeply(check_indexes($new, 'postgres', 'new cluster, files copied', @SPECS),
	$expected, 'with the old files copied, every index answers what the old cluster answered');
check_verify($new, 'postgres', 'new cluster', 1, @SPECS);
$new->safe_psql('postgres', 'INSERT INTO u SELECT i, i % 700, \'v\' || (i % 900) FROM generate_series(20001, 21000) i');
check_indexes($new, 'postgres', 'new cluster after inserts', @SPECS);
ok(wait_until(70, sub { join(' ', pmh_files($new)) eq join(' ', live_files($new, 'postgres')) }),
	'the copied file of the reindexed index is removed as an orphan');
check_log($new, 0, 'new cluster', qr/is damaged|STATEMENT:/);
$new->stop;

done_testing();
