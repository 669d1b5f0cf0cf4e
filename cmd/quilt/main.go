// Command quilt is the Quilt storage grid: storage nodes, a one-machine
// grid, and the client commands that store and read files on a grid.
//
// Run `quilt help` for the commands, `quilt COMMAND -h` for a command's
// flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/quilt-grid/quilt/internal/bulk"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
)

// version is the version of this build of quilt: set it with
// -ldflags "-X main.version=v1.2.3"; left empty, it comes from the build
// information (buildVersion).
var version = ""

func init() {
	if version == "" {
		version = buildVersion()
	}
}

// command is one `quilt` subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{
	"node":    {"run a storage node", runNode},
	"up":      {"run a whole grid on this machine", runUp},
	"put":     {"store a file; prints its read capability", runPut},
	"get":     {"read a file back by its capability", runGet},
	"cp":      {"copy files to and from buckets and your drive: parallel, resumable, checksummed", runCp},
	"rm":      {"cancel this client's lease on an object's shares (they go when no lease is left)", runRm},
	"renew":   {"renew this client's lease on objects' shares (run from cron)", runRenew},
	"check":   {"check an object's shares; --repair rebuilds missing ones", runCheck},
	"cap":     {"derive a verify capability from a read capability", runCap},
	"nodes":   {"list the grid's nodes", runNodes},
	"bench":   {"measure put/get throughput on the grid", runBench},
	"cfs":     {"the configuration filesystem: signed, replicated files (BaseFS)", runCFS},
	"gateway": {"serve the grid's buckets over S3", runGateway},
	"key":     {"create, list and delete S3 access keys", runKey},
	"user":    {"manage accounts: users, groups, app passwords, quotas, home drives", runUser},
	"swift":   {"manage Swift projects, users and endpoints", runSwift},
	"sftp":    {"serve the buckets' file trees over SFTP (sftp, scp, sshfs)", runSFTP},
	"mount":   {"mount a bucket's file tree on a directory (FUSE)", runMount},
	"webdav":  {"serve the buckets' file trees over WebDAV (file managers, rclone)", runWebDAV},
	"lab":     {"run the papers' experiments on an emulated network", runLab},
	"status":  {"say whether the grid is healthy: nodes by state and zone, space", runStatus},
	"volume":  {"block volumes for virtual machines: create, clone, snapshot, serve over NBD", runVolume},
	"version": {"print the version and the commit it was built from", runVersion},
}

func usage() {
	fmt.Fprintf(os.Stderr, `quilt %s: a storage grid for community clouds

Usage: quilt COMMAND [flags] [args]

Commands:
`, version)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(os.Stderr, `
Start with:  quilt up            (a 10-node grid on this machine)
then:        quilt put FILE      (prints a capability: keep it, it is the only way back)
             quilt get CAP -o FILE

Client commands find the grid from --grid INVITE, else $QUILT_GRID, else
the config that 'quilt up' writes in $QUILT_HOME (default ~/.quilt).
'quilt COMMAND -h' shows a command's flags.
`)
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	if os.Args[1] == "--version" || os.Args[1] == "-version" {
		fmt.Println(versionLine())
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "quilt: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile := startProfile()
	err := cmd.run(ctx, os.Args[2:])
	stopProfile()
	if err != nil {
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "quilt %s: %v\n", os.Args[1], err)
		if h := hint(err); h != "" {
			fmt.Fprintf(os.Stderr, "  hint: %s\n", h)
		}
		os.Exit(1)
	}
}

// errUsage means the flags were wrong; the flag package already said so.
var errUsage = errors.New("usage")

// errInterrupted means the command was stopped by Ctrl-C or SIGTERM
// before it finished.
var errInterrupted = errors.New("interrupted")

// hint says what to do about an error, where we know.
func hint(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errNoGrid):
		return "start a grid with 'quilt up', or pass --grid INVITE (the invite is in the grid's DIR/invite)"
	case errors.Is(err, node.ErrNoGrid):
		return "is the grid running? 'quilt up' starts one; a node's invite is in its data directory"
	case errors.Is(err, codec.ErrBadCap):
		return "capabilities look like quilt:r:... (read) or quilt:v:... (verify); copy the whole line 'quilt put' printed"
	case errors.Is(err, object.ErrUnavailable):
		return "run 'quilt check CAP' to see which shares are where; bring nodes back up, then 'quilt check --repair'"
	case errors.Is(err, object.ErrUnhappy):
		return "add nodes or free space, or lower --happy (and --n)"
	case errors.Is(err, bulk.ErrNoBucket):
		return "make the bucket first (. ~/.quilt/grid/gateway/s3.env; aws s3 mb s3://NAME), or check its name"
	case errors.Is(err, bulk.ErrUnreachable):
		return "is the gateway running ('quilt up' starts one)? the endpoint comes from --endpoint, $AWS_ENDPOINT_URL or s3.env ('quilt cp -h')"
	case errors.Is(err, bulk.ErrAccess):
		return "the access key is unknown, its secret wrong, or it may not use this bucket: see 'quilt key list' and s3.env"
	case strings.Contains(err.Error(), identity.ErrNotInGrid.Error()):
		// Joining wraps the last error as text.
		return "the node there is not in the invite's grid: the invite's secret is wrong or not this grid's; copy the invite again from a member's DIR/invite"
	case strings.Contains(err.Error(), "connection refused"):
		return "nothing listens at that address: is the node running, and is the address in the invite right?"
	}
	return ""
}
