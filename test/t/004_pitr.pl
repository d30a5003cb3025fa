# Point-in-time recovery of pmhash indexes from a base backup and archived WAL.
#
# An original node with archiving runs a pgbench workload of inserts,
# deletes, updates, VACUUM and CHECKPOINT on table rt while pg_basebackup
# copies it; the load goes on, an index is created after the backup, and
# once the load is over the per-key results of every index (checked against
# seqscans) are stored as the expected state and the moment is marked.
# Then the data changes a lot: more load, deletions, VACUUM, REINDEX,
# TRUNCATE.  A new node restored from the base backup and the archive to
# the mark (recovery_target_action = promote) must answer, for every key,
# what its own seqscan answers and what was stored, and pmhash_verify must
# count the non-null keys after a VACUUM.
# Case 1: index files inside the data directory (so in the base backup),
# msync path, target given by pg_create_restore_point.
# Case 2: pmhash.directory outside the data directory (on /dev/shm), so
# the base backup has no index file; the restored node gets its own empty
# directory; target given by LSN.  Indexes that existed at the backup,
# whether or not WAL after the backup touched them, must be rebuilt from
# their table on first use (LOG "was rebuilt from table"), never give wrong
# results, and the original node's files must be left alone.  Then the
# backup is restored again in place of the stopped original, reusing its
# directory: the files there are newer than the target, so every one is
# distrusted and its index rebuilt, and the answers are still those of the
# target.
# The server logs must show no error and no crash.
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
  [ update => 2 ];
my @STATIC = ([ 'st_k', 'st', 'k', '-g' ], [ 'su_k', 'su', 'k', '-g' ]);
my @ALL = (@RT_INDEXES, [ 'rt_n', 'rt', 'n', '-g' ], @STATIC);

# Run pgbench load on a node for some seconds and check that it succeeded.
sub run_load
{
	my ($node, $seconds, $during) = @_;
	my @runs = (
		start_pgbench($node, 'postgres', clients => 3, seconds => $seconds, rate => 200,
			scripts => \@LOAD),
		start_pgbench($node, 'postgres', clients => 1, seconds => $seconds,
			scripts => [ $scripts->{maint} ]));
	$during->() if $during;
	for my $run (@runs)
	{
		my ($rc, $out) = finish_pgbench($run);
		is($rc, 0, $node->name . ': the workload succeeded') or diag $out;
	}
	return;
}

# An original node with archiving: rt and static tables st and su, a base backup
# taken under load, an index created after it, more changes; returns the
# node once it is quiet.
sub original
{
	my ($name, %opt) = @_;
	my $node = new_node($name, %opt, init => { allows_streaming => 1, has_archiving => 1 });
	start_node($node);
	create_workload_table($node, 'postgres', 10000);
	$node->safe_psql('postgres',
		    'CREATE TABLE st (id int, k int); '
		  . 'INSERT INTO st SELECT i, i % 200 FROM generate_series(1, 3000) i; '
		  . 'CREATE INDEX st_k ON st USING pmhash (k) WITH (shards = 2); '
		  . 'CREATE TABLE su (id int, k int); '
		  . 'INSERT INTO su SELECT i, i % 300 FROM generate_series(1, 6000) i; '
		  . 'CREATE INDEX su_k ON su USING pmhash (k) WITH (shards = 2)');
	run_load($node, 12, sub { sleep 3; $node->backup('base'); });
	$node->safe_psql('postgres',
		    'CREATE INDEX rt_n ON rt USING pmhash (n) WITH (shards = 2); '
		  . 'UPDATE rt SET n = n + 1 WHERE id % 10 = 0; '
		  . 'INSERT INTO rt (k, t) SELECT rt_key(), rt_t(rt_key()) FROM generate_series(1, 5000)');
	return $node;
}

# Change a lot after the target, then archive all WAL.
sub change_and_archive
{
	my ($node) = @_;
	run_load($node, 4);
	$node->safe_psql('postgres',
		    'DELETE FROM rt WHERE id % 3 = 0; VACUUM rt; REINDEX INDEX rt_k; '
		  . 'UPDATE rt SET n = n + 7 WHERE id % 5 = 0; '
		  . 'TRUNCATE st; INSERT INTO st SELECT i, i % 50 FROM generate_series(1, 500) i; '
		  . 'DELETE FROM su WHERE id % 2 = 0');
	$node->safe_psql('postgres', 'VACUUM su');
	my $segment = $node->safe_psql('postgres', 'SELECT pg_walfile_name(pg_switch_wal())');
	ok($node->poll_query_until('postgres',
			"SELECT last_archived_wal >= '$segment' FROM pg_stat_archiver"),
		$node->name . ": WAL up to $segment is archived");
	return;
}

# A node restored from the base backup and the archive of $orig, recovering
# to a target and promoting there; dir => 'data' or 'shm' as for new_node.
sub restore
{
	my ($name, $orig, $target, %opt) = @_;
	my $node = new_node_from_backup($name, $orig, 'base', %opt,
		restore => { has_restoring => 1, standby => 0 },
		conf => "$target\nrecovery_target_action = 'promote'\narchive_mode = off\n");
	start_node($node);
	ok($node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
		"$name: recovery ended and the node is promoted");
	return $node;
}

# Check a restored node against the stored state (each index on its own,
# so that one failing index does not hide the others), then after a VACUUM.
sub check_restored
{
	my ($node, $expected, $rows) = @_;
	my $name = $node->name;
	my %got = map { %{ check_indexes($node, 'postgres', "$name at the target", $_) } } @ALL;
	is_deeply(\%got, $expected, "$name: every key gives what the original gave at the target");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM rt'), $rows,
		"$name: rt has the rows of the target");
	check_verify($node, 'postgres', $name, 0, @ALL);
	for my $table ('rt', 'st', 'su')
	{
		my ($rc, $out, $err) = $node->psql('postgres', "$VACUUM $table");
		is($rc, 0, "$name: VACUUM $table succeeds") or diag $err;
	}
	check_indexes($node, 'postgres', "$name, after VACUUM", $_) for @ALL;
	check_verify($node, 'postgres', "$name, after VACUUM", 1, @ALL);
	return;
}

############################################################################
# Case 1: index files in the base backup, target by restore point.
############################################################################

{
	my $orig = original('orig_in', dir => 'data', force => 0);
	my $expected = check_indexes($orig, 'postgres', 'orig_in at the target', @ALL);
	my $rows = $orig->safe_psql('postgres', 'SELECT count(*) FROM rt');
	$orig->safe_psql('postgres', "SELECT pg_create_restore_point('target')");
	change_and_archive($orig);

	my $node = restore('restored_in', $orig, "recovery_target_name = 'target'", dir => 'data');
	my $log = slurp_file($node->logfile);
	like($log, qr/recovery stopping at restore point "target"/,
		'restored_in: recovery stopped at the restore point');
	cmp_ok(scalar(pmh_files($node)), '>=', 4, 'restored_in: the base backup held the index files');
	check_restored($node, $expected, $rows);
	check_log($node, 0, 'restored_in');
	check_log($orig, 0, 'orig_in');
	$node->stop;
	$orig->stop;
}

############################################################################
# Case 2: pmhash.directory outside the data directory, target by LSN.
############################################################################

{
	my $orig = original('orig_out', dir => 'shm', force => 1);
	my $expected = check_indexes($orig, 'postgres', 'orig_out at the target', @ALL);
	my $rows = $orig->safe_psql('postgres', 'SELECT count(*) FROM rt');
	my $lsn = $orig->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	change_and_archive($orig);
	my @orig_files = pmh_files($orig);

	my $node = restore('restored_out', $orig,
		"recovery_target_lsn = '$lsn'\nrecovery_target_inclusive = off", dir => 'shm');
	isnt(pmhash_dir($node), pmhash_dir($orig), 'restored_out has its own pmhash.directory');
	my $log = slurp_file($node->logfile);
	like($log, qr/recovery stopping before WAL location \(LSN\) "\Q$lsn\E"/,
		'restored_out: recovery stopped at the LSN');
	check_restored($node, $expected, $rows);
	$log = slurp_file($node->logfile);
	for my $spec (@RT_INDEXES, @STATIC)
	{
		my ($index, $table) = @$spec;
		like($log, qr/pmhash index "\Q$index\E" was rebuilt from table "\Q$table\E"/,
			"restored_out: $index, whose file was not in the base backup, was rebuilt");
	}
	ok(wait_until(10, sub { join(' ', pmh_files($node)) eq join(' ', live_files($node, 'postgres')) }),
		'restored_out: its directory holds exactly the files of its indexes')
	  or diag 'files: ' . join(' ', pmh_files($node)) . '; indexes: '
	  . join(' ', live_files($node, 'postgres'));
	check_log($node, 0, 'restored_out');

	is_deeply([ pmh_files($orig) ], \@orig_files, 'orig_out: its files are still there');
	check_indexes($orig, 'postgres', 'orig_out after the restore', @ALL);
	check_log($orig, 0, 'orig_out');
	$node->stop;
	$orig->stop;

	# The backup restored in place of the stopped original, reusing its
	# directory, whose files are newer than the target.
	my $reuse = restore('restored_reuse', $orig,
		"recovery_target_lsn = '$lsn'\nrecovery_target_inclusive = off",
		dir => pmhash_dir($orig));
	$log = slurp_file($reuse->logfile);
	for my $file (@orig_files)
	{
		like($log, qr/pmhash: ".*\/\Q$file\E" is not part of the restored base backup/,
			"restored_reuse: $file of the original is distrusted");
	}
	check_restored($reuse, $expected, $rows);
	check_log($reuse, 0, 'restored_reuse');
	$reuse->stop;
}

done_testing();
