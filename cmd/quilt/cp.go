package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/quilt-grid/quilt/internal/bulk"
)

const cpUsage = `Usage: quilt cp [flags] SRC DST
       quilt cp -r [flags] DIR s3://BUCKET/PREFIX/   (or drive:PATH/)
       quilt cp -r [flags] s3://BUCKET/PREFIX/ DIR

Copies files between this machine and the grid's buckets through the
gateway's S3 API: many files and many parts of each file at once,
resumable, every byte checked by SHA-256 end to end.

  s3://BUCKET/KEY   an object (s3://BUCKET/PREFIX/ with -r)
  drive:PATH        a path in your drive: the bucket of --drive, else
                    $QUILT_DRIVE, else the only bucket the access key
                    reaches (an account's key: its home), else "files"
  anything else     a local path

A file copied to a directory (a local one that exists, or a path or key
ending in "/") keeps its name. With -r the files under DIR (or PREFIX)
go under the destination with their relative paths, as awscli's cp
--recursive. A file already at the destination with the same size and
SHA-256 is skipped, so running a copy again finishes what is missing.

Interrupted (Ctrl-C, a lost link, a killed process), the same command
run again resumes: an upload larger than one part from its checkpoint in
--state (upload ID and the parts the gateway acknowledged; the source
must be unchanged), a download from DEST.quilt-cp-partial and its
.json checkpoint beside it.

The gateway: --endpoint, --access-key, --secret-key, --region and
--ca-bundle, else the AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION and AWS_CA_BUNDLE of the
environment when AWS_ENDPOINT_URL is set, else the s3.env that 'quilt
up' writes ($QUILT_HOME/grid/gateway/s3.env).

Exit status: 0 when every file was copied or found identical, 1 when
any failed (each is named; the rest were copied) or the copy was
interrupted, 2 for bad arguments.`

func runCp(ctx context.Context, args []string) error {
	fs := newFlagSet("cp", cpUsage)
	recursive := fs.Bool("r", false, "copy a directory or a prefix, recursively")
	fs.BoolVar(recursive, "recursive", false, "same as -r")
	partSize := fs.String("part-size", "16MiB", "size of the parts of an upload and the ranges of a download (at least 5MiB; larger for files over 10,000 parts)")
	parallel := fs.Int("parallel", bulk.DefaultParallel, "parts (or small files) in flight at once, in total")
	files := fs.Int("files", bulk.DefaultFiles, "files in flight at once")
	bwlimit := fs.String("bwlimit", "", "total bandwidth limit across every stream, bytes per second (1M, 500k, 2.5MiB; k and M are 1024-based); default none")
	dryRun := fs.Bool("dry-run", false, "say what would be copied (and what skipped), copy nothing")
	verbose := fs.Bool("v", false, "say what happens to each file: skipped, resumed, verified how")
	var ep endpointFlags
	ep.register(fs)
	drive := fs.String("drive", "", "the bucket drive: paths name (default $QUILT_DRIVE, else the access key's one bucket, its account's home, else \"files\")")
	state := fs.String("state", "", "directory of upload checkpoints (default $XDG_CACHE_HOME/quilt/cp, ~/.cache/quilt/cp)")
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	for _, a := range fs.Args() { // the syntax, before the gateway is asked where the drive is
		if _, err := bulk.Parse(a, "drive"); err != nil {
			return err
		}
	}
	cfg := bulk.Config{Parallel: *parallel, Files: *files, DryRun: *dryRun}
	var err error
	if cfg.PartSize, err = parseSize(*partSize); err != nil {
		return fmt.Errorf("--part-size: %w", err)
	}
	if *bwlimit != "" {
		r, err := parseSize(*bwlimit)
		if err != nil || r <= 0 {
			return fmt.Errorf("--bwlimit %q: want a positive rate in bytes per second, like 1M or 500k", *bwlimit)
		}
		cfg.Limiter = bulk.NewLimiter(r, nil)
	}
	if cfg.StateDir = *state; cfg.StateDir == "" {
		cfg.StateDir = cpStateDir()
	}
	if *verbose || *dryRun {
		cfg.Verbose = func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	}
	e, err := ep.endpoint()
	if err != nil {
		return err
	}
	client, err := bulk.NewClient(e)
	if err != nil {
		return err
	}
	driveName := ""
	if strings.HasPrefix(fs.Arg(0), "drive:") || strings.HasPrefix(fs.Arg(1), "drive:") {
		if driveName, err = driveBucket(ctx, *drive, client); err != nil {
			return err
		}
	}
	src, err := bulk.Parse(fs.Arg(0), driveName)
	if err != nil {
		return err
	}
	dst, err := bulk.Parse(fs.Arg(1), driveName)
	if err != nil {
		return err
	}
	c, err := bulk.New(client, cfg)
	if err != nil {
		return err
	}
	ts, err := c.Plan(ctx, src, dst, *recursive)
	if err != nil && ctx.Err() != nil {
		return errInterrupted
	}
	if err != nil {
		return err
	}
	var total int64
	for _, t := range ts {
		total += t.Size
	}
	var filesDone atomic.Int64
	c.SetDone(func(bulk.Transfer, time.Duration, error) { filesDone.Add(1) })
	var note func() string
	if len(ts) > 1 {
		note = func() string { return fmt.Sprintf("%d/%d files", filesDone.Load(), len(ts)) }
	}
	bar := startProgressNote("cp", total, note)
	c.SetProgress(func(n int64) { bar.done.Add(n) }, func(n int64) { bar.done.Add(n); bar.already.Add(n) })
	start := time.Now()
	st, err := c.Run(ctx, ts)
	bar.finish()
	secs := time.Since(start).Seconds()
	summary := fmt.Sprintf("%d copied, %d identical skipped", st.Files, st.Skipped)
	if *dryRun {
		summary = fmt.Sprintf("%d would be copied, %d identical skipped", st.DryRun, st.Skipped)
	}
	if st.Resumed > 0 {
		summary += fmt.Sprintf(", %d resumed", st.Resumed)
	}
	if st.Failed > 0 {
		summary += fmt.Sprintf(", %d failed", st.Failed)
	}
	fmt.Fprintf(os.Stderr, "%s; %s moved in %.1fs (%s/s)\n", summary, human(st.Bytes), secs, human(int64(float64(st.Bytes)/max(secs, 0.001))))
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: run the same command again to resume", errInterrupted)
	}
	return err
}

// driveBucket is the bucket that drive: paths name: flag (--drive),
// else $QUILT_DRIVE, else the only bucket the access key may read (an
// account's key reaches its home bucket, home-NAME, alone), else
// "files" (the home of the account 'quilt up' makes first) if the key
// may read it.
func driveBucket(ctx context.Context, flag string, client *s3.Client) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if b := os.Getenv("QUILT_DRIVE"); b != "" {
		return b, nil
	}
	out, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		return "", fmt.Errorf("finding your drive (the buckets of this key): %w", err)
	}
	var names []string
	for _, b := range out.Buckets {
		names = append(names, aws.ToString(b.Name))
	}
	switch {
	case len(names) == 1:
		return names[0], nil
	case slices.Contains(names, "files"):
		return "files", nil
	case len(names) == 0:
		return "", errors.New("this access key reaches no bucket, so it has no drive: use s3://BUCKET/KEY, or --drive BUCKET")
	}
	return "", fmt.Errorf("this access key reaches %d buckets (%s): say which is your drive with --drive BUCKET or $QUILT_DRIVE", len(names), strings.Join(names, ", "))
}

// cpStateDir is the default directory of upload checkpoints.
func cpStateDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "quilt", "cp")
	}
	return filepath.Join(home(), "cp")
}

// endpointFlags are the flags that name a gateway's S3 endpoint and keys.
type endpointFlags struct {
	url, key, secret, region, ca string
}

func (f *endpointFlags) register(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&f.url, "endpoint", "", "the gateway's S3 endpoint URL (default $AWS_ENDPOINT_URL, else s3.env's)")
	fs.StringVar(&f.key, "access-key", "", "access key ID (default $AWS_ACCESS_KEY_ID, else s3.env's)")
	fs.StringVar(&f.secret, "secret-key", "", "secret access key (default $AWS_SECRET_ACCESS_KEY, else s3.env's)")
	fs.StringVar(&f.region, "region", "", "region (default $AWS_DEFAULT_REGION, else s3.env's, else us-east-1)")
	fs.StringVar(&f.ca, "ca-bundle", "", "PEM file of the CA to trust for an https endpoint (default $AWS_CA_BUNDLE, else s3.env's)")
}

// s3EnvPath is the s3.env of the gateway 'quilt up' runs.
func s3EnvPath() string {
	if cfg, err := loadConfig(); err == nil && cfg.Gateway != "" {
		return filepath.Join(cfg.Gateway, "s3.env")
	}
	return filepath.Join(home(), "grid", "gateway", "s3.env")
}

// endpoint resolves the endpoint: the environment's AWS_* when
// AWS_ENDPOINT_URL is set, else s3.env; each flag given overrides its
// field. Sources are not mixed otherwise, so keys meant for another
// service never reach this gateway.
func (f *endpointFlags) endpoint() (bulk.Endpoint, error) {
	vars := map[string]string{}
	from := ""
	if os.Getenv("AWS_ENDPOINT_URL") != "" {
		for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_CA_BUNDLE"} {
			vars[k] = os.Getenv(k)
		}
		from = "the environment"
	} else if f.url == "" || f.key == "" || f.secret == "" {
		p := s3EnvPath()
		var err error
		if vars, err = readEnvFile(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return bulk.Endpoint{}, err
		}
		from = p
	}
	pick := func(flag string, keys ...string) string {
		if flag != "" {
			return flag
		}
		for _, k := range keys {
			if vars[k] != "" {
				return vars[k]
			}
		}
		return ""
	}
	e := bulk.Endpoint{
		URL:      pick(f.url, "AWS_ENDPOINT_URL"),
		KeyID:    pick(f.key, "AWS_ACCESS_KEY_ID"),
		Secret:   pick(f.secret, "AWS_SECRET_ACCESS_KEY"),
		Region:   pick(f.region, "AWS_DEFAULT_REGION", "AWS_REGION"),
		CABundle: pick(f.ca, "AWS_CA_BUNDLE"),
	}
	if e.URL == "" || e.KeyID == "" || e.Secret == "" {
		return e, fmt.Errorf("%w (looked in the flags and %s): start a grid with 'quilt up', or pass --endpoint, --access-key and --secret-key", bulk.ErrNoCredentials, from)
	}
	return e, nil
}

// readEnvFile reads the `export NAME=VALUE` lines of a shell file such
// as s3.env (quotes around a value are removed).
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vars[strings.TrimSpace(k)] = v
	}
	return vars, sc.Err()
}
