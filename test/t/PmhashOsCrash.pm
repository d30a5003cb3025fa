# Simulated operating system crashes of the msync path (012_os_crash,
# 025_split_crash).  A node runs with pmhash.os_crash_shadows on: every
# range pmhash syncs is also copied into "<file>.shadow" (src/pmshadow.c),
# so a shadow holds what an operating system crash is guaranteed to leave
# of its file.  os_crash stops the server (immediately, unless told
# otherwise: nothing more reaches the files), puts each shadow in place of
# its index file, keeping a random quarter of the file's current 4 kB pages
# instead (write-back the OS may have done on its own), removes index files
# that have no shadow (never synced) and shadows whose file is gone, blanks
# the boot that the file headers recorded (an OS crash starts a new boot),
# and starts the server.  PostgreSQL's own files keep everything but the
# WAL buffers the stop lost: the simulation takes away only what pmhash did
# not sync.
package PmhashOsCrash;

use strict;
use warnings;

use Exporter 'import';
use PmhashRecovery qw(pmhash_dir start_node);

our @EXPORT = qw(os_crash write_file);

my $PAGE = 4096;
my $WRITEBACK = 0.25;    # share of unsynced pages that keep the file's content
my $BOOT_OFFSET = 96;    # PmhFileHeader.redo_boot

# Read a whole file.
sub read_file
{
	my ($path) = @_;
	open my $fh, '<:raw', $path or die "open $path: $!";
	local $/;
	my $data = <$fh>;
	close $fh;
	return $data // '';
}

# Replace a whole file's content.
sub write_file
{
	my ($path, $data) = @_;
	open my $fh, '>:raw', $path or die "open $path: $!";
	print $fh $data;
	close $fh or die "close $path: $!";
	return;
}

# Stop the node (at once, unless $mode says otherwise) and leave of each
# index file what an OS crash could: its shadow, with some pages written
# back (a share $writeback of them, a quarter unless given); with $durable
# 'missing' or 'damaged', do that to pmhash.durable too.  Then start the
# node.  Returns a summary and the number of pages whose unsynced content
# the simulation took away.
sub os_crash
{
	my ($node, $mode, $durable, $writeback) = @_;
	$writeback //= $WRITEBACK;
	$node->stop($mode // 'immediate');
	my $dir = pmhash_dir($node);
	my ($files, $dropped, $lost) = (0, 0, 0);
	opendir my $dh, $dir or die "opendir $dir: $!";
	my @names = readdir $dh;
	closedir $dh;
	for my $name (grep { /\.pmh$/ } @names)
	{
		my $path = "$dir/$name";
		if (!-e "$path.shadow")
		{
			unlink $path or die "unlink $path: $!";
			$dropped++;
			next;
		}
		my $live = read_file($path);
		my $kept = read_file("$path.shadow");
		for (my $off = 0; $off < length($kept); $off += $PAGE)
		{
			my $page = substr($kept, $off, $PAGE);
			my $now = $off < length($live) ? substr($live, $off, length($page)) : $page;
			next if $now eq $page;
			if (rand() < $writeback)
			{
				substr($kept, $off, length($page), $now);
			}
			else
			{
				$lost++;
			}
		}
		# a new boot: the one a header recorded with unsynced replayed changes is over
		substr($kept, $BOOT_OFFSET, 16, "\0" x 16) if length($kept) >= $BOOT_OFFSET + 16;
		write_file($path, $kept);
		write_file("$path.shadow", $kept);
		$files++;
	}
	for my $name (grep { /\.pmh\.shadow$/ } @names)
	{
		(my $file = $name) =~ s/\.shadow$//;
		unlink "$dir/$name" unless -e "$dir/$file";
	}
	if (($durable // '') eq 'missing')
	{
		unlink "$dir/pmhash.durable" or die "unlink $dir/pmhash.durable: $!";
	}
	elsif (($durable // '') eq 'damaged')
	{
		write_file("$dir/pmhash.durable", join('', map { chr(int(rand(256))) } 1 .. 1024));
	}
	start_node($node);
	return ("$files files from their shadows ($lost unsynced pages lost), $dropped never synced", $lost);
}

1;
