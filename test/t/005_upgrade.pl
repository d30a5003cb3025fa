# pg_upgrade of a cluster with pmhash indexes, from the same major version,
# or, with PMHASH_UPGRADE_FROM set to an older installation's directory
# (/usr/lib/postgresql/15, with pmhash installed), from that version to the
# one under test; relfilenodes and database OIDs are kept (PostgreSQL 15
# and later).  Once with pmhash.directory in each data directory, once with
# each cluster's directory outside it.
#
# pg_upgrade carries the metapages but not pmhash.directory.  Without the
# files, a query through an index must fail with a REINDEX hint, not crash
# and not answer wrongly; REINDEX repairs an index.  Copying the old
# cluster's index files into the new cluster's directory (what the README
# says to do) makes every index, a unique one too, answer what the old
# cluster answered and pass pmhash_verify; the unique index still refuses
# duplicates, and ALTER EXTENSION pmhash UPDATE leaves the extension at its
# default version.
use strict;
use warnings;

use File::Copy qw(copy);
use FindBin;
use lib $FindBin::RealBin;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @SPECS = (
	[ 'u_k', 'u', 'k', '-g' ],
	[ 'u_t', 'u', 't', "'absent' || g" ],
	[ 'u_id', 'u', 'id', '-g' ]);
my $FROM = $ENV{PMHASH_UPGRADE_FROM};
my ($NEW_MAJOR) = `pg_config --version` =~ /PostgreSQL (\d+)/;

# One upgrade, with both clusters' pmhash.directory of kind $dir.
sub upgrade_case
{
	my ($dir) = @_;
	my $old = new_node("old_$dir", dir => $dir, $FROM ? (install_path => $FROM) : ());
	start_node($old);
	my $from_version = $old->safe_psql('postgres', 'SHOW server_version');
	$old->safe_psql('postgres', <<'EOS');
CREATE EXTENSION pmhash;
CREATE TABLE u (id int, k int8, t text);
INSERT INTO u SELECT i, i % 700, 'v' || (i % 900) FROM generate_series(1, 20000) i;
CREATE INDEX u_k ON u USING pmhash (k);
CREATE INDEX u_t ON u USING pmhash (t);
CREATE UNIQUE INDEX u_id ON u USING pmhash (id);
DELETE FROM u WHERE id % 7 = 0;
VACUUM (FREEZE, INDEX_CLEANUP ON) u;
EOS
	my $expected = check_indexes($old, 'postgres', "$dir: old cluster", @SPECS);
	my @old_files = pmh_files($old);
	is(scalar(@old_files), 3, "$dir: the old cluster has the three index files");
	$old->stop;

	# PostgreSQL 18's initdb turns data checksums on; the old cluster has none
	my $new = new_node("new_$dir", dir => $dir,
		$NEW_MAJOR >= 18 && $old->pg_version < 18
		? (init => { extra => ['--no-data-checksums'] })
		: ());
	my $workdir = PostgreSQL::Test::Utils::tempdir();
	chdir $workdir or die "chdir $workdir: $!";
	command_ok(
		[
			'pg_upgrade', '--no-sync',
			'-d', $old->data_dir,
			'-D', $new->data_dir,
			'-b', $old->config_data('--bindir'),
			'-B', $new->config_data('--bindir'),
			'-s', $new->host,
			'-p', $old->port,
			'-P', $new->port
		],
		"$dir: pg_upgrade from $from_version succeeds");
	start_node($new);

	# Without the old files: an error naming the index, with a REINDEX hint.
	for my $spec (@SPECS)
	{
		my ($index, $table, $col) = @$spec;
		my ($rc, $out, $err) = $new->psql('postgres',
			"SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT count(*) FROM $table WHERE $col = (SELECT $col FROM $table WHERE $col IS NOT NULL LIMIT 1)");
		isnt($rc, 0, "$dir: $index without its file: the query fails");
		like($err, qr/ERROR:  pmhash index "\Q$index\E" is damaged/, "$dir: $index without its file: names the index");
		like($err, qr/HINT:  Rebuild the index with REINDEX INDEX \Q$index\E\./,
			"$dir: $index without its file: hints at REINDEX");
	}

	# REINDEX repairs one index.
	$new->safe_psql('postgres', 'REINDEX INDEX u_t');
	my $after_reindex = check_indexes($new, 'postgres', "$dir: new cluster, u_t reindexed", $SPECS[1]);
	is($after_reindex->{u_t}, $expected->{u_t}, "$dir: u_t after REINDEX answers what the old cluster answered");

	# Copying the old files makes the other indexes work as they were.
	$new->stop;
	for my $file (@old_files)
	{
		copy(pmhash_dir($old) . "/$file", pmhash_dir($new) . "/$file") or die "copy $file: $!";
	}
	start_node($new);
	is_deeply(check_indexes($new, 'postgres', "$dir: new cluster, files copied", @SPECS),
		$expected, "$dir: with the old files copied, every index answers what the old cluster answered");
	check_verify($new, 'postgres', "$dir: new cluster", 1, @SPECS);
	my ($rc, $out, $err) = $new->psql('postgres', 'INSERT INTO u VALUES (1, 1, \'dup\')');
	like($err, qr/duplicate key value violates unique constraint "u_id"/,
		"$dir: the unique index refuses an existing id");
	$new->safe_psql('postgres', 'INSERT INTO u SELECT i, i % 700, \'v\' || (i % 900) FROM generate_series(20001, 21000) i');
	check_indexes($new, 'postgres', "$dir: new cluster after inserts", @SPECS);
	$new->safe_psql('postgres', 'ALTER EXTENSION pmhash UPDATE');
	is($new->safe_psql('postgres',
			"SELECT extversion = default_version FROM pg_extension JOIN pg_available_extensions ON name = extname WHERE extname = 'pmhash'"),
		't', "$dir: ALTER EXTENSION pmhash UPDATE: the default version");
	ok(wait_until(70, sub { join(' ', pmh_files($new)) eq join(' ', live_files($new, 'postgres')) }),
		"$dir: the copied file of the reindexed index is removed as an orphan");
	check_log($new, 0, "$dir: new cluster", qr/is damaged|STATEMENT:|duplicate key/);
	$new->stop;
	return;
}

upgrade_case('data');
upgrade_case('shm');

done_testing();
