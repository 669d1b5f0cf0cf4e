package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/nbd"
	"github.com/quilt-grid/quilt/internal/volume"
)

// volumeSet is the gateway registry's record set that holds the volumes'
// maps; leaseSet holds the writers' leases, one record per volume open
// for writing.
const (
	volumeSet = "volumes"
	leaseSet  = "volume-leases"
)

// registryCatalog keeps volume maps (or leases) as records of one set of
// the gateway's registry.
type registryCatalog struct {
	gw  *gateway.Gateway
	set string
}

// Get pulls the registry first: a volume's map or lease another process
// committed a moment ago (quilt volume import, clone, a lease released)
// is the one read, not the replica's older copy.
func (c registryCatalog) Get(ctx context.Context, name string) ([]byte, error) {
	if err := c.gw.SyncRegistry(ctx); err != nil {
		return nil, fmt.Errorf("volume records: %w", err)
	}
	return c.gw.Record(ctx, c.set, name)
}

func (c registryCatalog) Put(ctx context.Context, name string, body []byte) error {
	return c.gw.PutRecord(ctx, c.set, name, body)
}

func (c registryCatalog) Delete(ctx context.Context, name string) error {
	return c.gw.DeleteRecord(ctx, c.set, name)
}

func (c registryCatalog) List(ctx context.Context) (map[string][]byte, error) {
	return c.gw.Records(ctx, c.set)
}

const volumeUsage = `Usage: quilt volume create NAME --size SIZE
       quilt volume ls
       quilt volume clone SRC DST
       quilt volume snapshot NAME SNAP     (makes the read-only volume NAME@SNAP)
       quilt volume rollback NAME SNAP     (NAME reads as NAME@SNAP again; unflushed writes are lost)
       quilt volume resize NAME --size SIZE
       quilt volume rm NAME
       quilt volume import NAME FILE [--format auto|raw|qcow2]  (- for stdin; the volume is made if missing)
       quilt volume export NAME FILE [--format raw|qcow2]       (- for stdout, raw only)
       quilt volume cert NAME DIR          (a client certificate that opens NAME over TLS, into DIR)
       quilt volume revoke NAME            (no certificate made before opens NAME any more)
       quilt volume serve [--listen ADDR] [--tls on|off|auto]  (every volume as a named NBD export)

Block volumes for virtual machines, kept on the grid as 4 MiB extent objects
and a map in the registry of the gateway in --dir (docs/volumes.md).`

func runVolume(ctx context.Context, args []string) error {
	fs := newFlagSet("volume", volumeUsage)
	var g gridFlags
	g.register(fs)
	dir := fs.String("dir", "", "gateway state directory (default: the gateway 'quilt up' runs for the default grid, else $QUILT_HOME/gateway)")
	sizeFlag := fs.String("size", "", "create, resize: the volume's size (64MiB, 10GiB; a multiple of 512 bytes)")
	listen := fs.String("listen", "127.0.0.1:10809", "serve: the NBD address (host:port)")
	state := fs.String("state", "", "serve: the journals' directory (default DIR/volumes)")
	tlsMode := fs.String("tls", "auto", "serve: "+nbdTLSHelp)
	format := fs.String("format", "", "import: the image's format, auto (qcow2 by its magic, else raw), raw or qcow2; export: raw (default) or qcow2 (qcow2 needs qemu-img)")
	if err := parseArgs(fs, args, -1); err != nil {
		return err
	}
	want := map[string]int{"create": 2, "ls": 1, "clone": 3, "snapshot": 3, "rollback": 3, "resize": 2, "rm": 2, "import": 3, "export": 3, "serve": 1,
		"cert": 3, "revoke": 2}
	verb := fs.Arg(0)
	if n, ok := want[verb]; !ok || fs.NArg() != n {
		fs.Usage()
		return errUsage
	}
	if err := checkNBDTLSMode(*tlsMode); err != nil {
		return err
	}
	if *dir == "" {
		*dir = keyDir(g.grid)
	}
	if *state == "" {
		*state = filepath.Join(*dir, "volumes")
	}
	var size int64
	if verb == "create" || verb == "resize" {
		var err error
		if size, err = parseSize(*sizeFlag); err != nil || size <= 0 {
			return fmt.Errorf("--size %q: want a size such as 64MiB", *sizeFlag)
		}
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	gw, closeGW, err := openGatewayCopy(ctx, s, *dir)
	if err != nil {
		return err
	}
	defer closeGW()
	happy, err := volumeHappy(ctx, s)
	if err != nil {
		return err
	}
	if verb == "serve" {
		release, err := lockDir(*state)
		if err != nil {
			return err
		}
		defer release()
	} else if err := os.MkdirAll(*state, 0o700); err != nil {
		return err
	}
	// Commands other than serve get a journal directory of their own, so
	// a running server's is left alone (a journal is never read back
	// after its handle: a volume opens at its committed map).
	jdir, tmp := *state, ""
	if verb != "serve" {
		if tmp, err = os.MkdirTemp("", "quilt-volume-"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		jdir = filepath.Join(tmp, "volumes")
	}
	cfg := volume.Config{Catalog: registryCatalog{gw, volumeSet}, Objects: s.objects, Params: codec.DefaultParams(),
		Happy: happy, StateDir: jdir}
	if verb == "serve" || verb == "import" || verb == "rollback" || verb == "resize" {
		// Writers take the volume's lease: one writer per volume.
		cfg.Leases = registryCatalog{gw, leaseSet}
	}
	if verb == "serve" {
		cfg.LeaseOwner = leaseOwner(*state)
	}
	m, err := volume.New(cfg)
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		return m.Create(ctx, fs.Arg(1), size)
	case "ls":
		ls, err := m.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSIZE\tSTORED\tMODE\tORIGIN")
		for _, in := range ls {
			mode := "rw"
			if in.ReadOnly {
				mode = "ro"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Name, human(in.Size), human(int64(in.Stored())*volume.ExtentSize), mode, in.Origin)
		}
		return tw.Flush()
	case "clone":
		return m.Clone(ctx, fs.Arg(1), fs.Arg(2), false)
	case "snapshot":
		return m.Clone(ctx, fs.Arg(1), fs.Arg(1)+"@"+fs.Arg(2), true)
	case "rollback":
		return m.Rollback(ctx, fs.Arg(1), fs.Arg(1)+"@"+fs.Arg(2))
	case "resize":
		return m.Resize(ctx, fs.Arg(1), size)
	case "rm":
		if err := m.Remove(ctx, fs.Arg(1)); err != nil {
			return err
		}
		return volumeRevoke(ctx, gw, fs.Arg(1))
	case "cert":
		return volumeCert(ctx, gw, m, *dir, fs.Arg(1), fs.Arg(2))
	case "revoke":
		return volumeRevoke(ctx, gw, fs.Arg(1))
	case "import":
		var f *os.File
		if fs.Arg(2) == "-" {
			f, err = spoolStdin(tmp)
		} else {
			f, err = os.Open(fs.Arg(2))
		}
		if err != nil {
			return err
		}
		defer f.Close()
		fmtName, err := imageFormat(f, *format)
		if err != nil {
			return err
		}
		if fmtName == formatQcow2 {
			return volumeImportQcow2(ctx, m, fs.Arg(1), f, tmp)
		}
		return volumeImport(ctx, m, fs.Arg(1), f)
	case "export":
		switch *format {
		case "", formatRaw:
			return volumeExport(ctx, m, fs.Arg(1), fs.Arg(2))
		case formatQcow2:
			return volumeExportQcow2(ctx, m, fs.Arg(1), fs.Arg(2), tmp)
		}
		return fmt.Errorf("--format %q: want raw or qcow2", *format)
	}
	auth, err := newNBDAuth(gw, *dir, *listen, *tlsMode)
	if err != nil {
		return err
	}
	return volumeServe(ctx, m, *listen, auth, npClones{gw, cfg.LeaseOwner})
}

// volumeHappy is how many distinct nodes an extent must reach: as many as
// the grid has alive, up to 7 (as the gateway's objects).
func volumeHappy(ctx context.Context, s *session) (int, error) {
	ms, err := s.nodes.Members(ctx, 10*time.Second)
	if err != nil {
		return 0, err
	}
	alive := 0
	for _, m := range ms {
		if m.State == member.Alive {
			alive++
		}
	}
	return max(1, min(alive, 7, codec.DefaultParams().N)), nil
}

// volumeImport copies the raw image in f into a volume, making it the
// image's size (rounded up to a sector) if it does not exist.
func volumeImport(ctx context.Context, m *volume.Manager, name string, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := m.Stat(ctx, name); errors.Is(err, volume.ErrNotFound) {
		if err := m.Create(ctx, name, (st.Size()+volume.Sector-1)/volume.Sector*volume.Sector); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	v, err := m.Open(ctx, name)
	if err != nil {
		return err
	}
	defer v.Close()
	if st.Size() > v.Size() {
		return fmt.Errorf("%s is %d bytes, volume %s only %d", f.Name(), st.Size(), name, v.Size())
	}
	buf := make([]byte, volume.ExtentSize)
	for off := int64(0); off < st.Size(); {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			if err := v.WriteAt(ctx, buf[:n], off, false); err != nil {
				return err
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	return v.Flush(ctx)
}

// volumeExport writes a volume's committed contents to a raw image.
func volumeExport(ctx context.Context, m *volume.Manager, name, file string) error {
	v, err := m.Open(ctx, name)
	if err != nil {
		return err
	}
	defer v.Close()
	out := os.Stdout
	if file != "-" {
		if out, err = os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			return err
		}
	}
	buf := make([]byte, volume.ExtentSize)
	for off := int64(0); off < v.Size(); {
		n := min(int64(len(buf)), v.Size()-off)
		if err := v.ReadAt(ctx, buf[:n], off); err != nil {
			return err
		}
		if _, err := out.Write(buf[:n]); err != nil {
			return err
		}
		off += n
	}
	if file != "-" {
		if err := out.Sync(); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	return nil
}

// volumeServe serves every volume as a named NBD export until interrupted.
func volumeServe(ctx context.Context, m *volume.Manager, addr string, auth *nbdAuth, np npClones) error {
	ns, err := listenNBD(ctx, m, addr, auth, np)
	if err != nil {
		return fmt.Errorf("volume serve: %w", err)
	}
	fmt.Fprintf(os.Stderr, "quilt volume: serving NBD on %s (%s/NAME)\n", ns.addr, ns.url())
	if auth != nil {
		fmt.Fprintf(os.Stderr, "quilt volume: TLS required; server certificate from the CA %s; clients need quilt volume cert NAME DIR\n", auth.caFile)
	}
	<-ctx.Done()
	return ns.Close()
}

// nbdService is an NBD server of a manager's volumes, every volume a named
// export.
type nbdService struct {
	srv     *nbd.Server
	addr    string   // host:port it listens on
	auth    *nbdAuth // nil: plain NBD
	release func()   // unlocks the journals' directory, if it was locked here
}

// url is the server's address as an NBD URI: nbds:// when TLS is
// required.
func (ns *nbdService) url() string {
	if ns.auth != nil {
		return "nbds://" + ns.addr
	}
	return "nbd://" + ns.addr
}

// listenNBD starts serving m's volumes on addr; with auth, over TLS only
// and each volume to the certificates of its keys.
func listenNBD(ctx context.Context, m *volume.Manager, addr string, auth *nbdAuth, np npClones) (*nbdService, error) {
	np.removeStale(ctx, m)
	cfg := nbd.Config{
		Exports: func(ctx context.Context, peer nbd.Peer) ([]string, error) {
			ls, err := m.List(ctx) // pulls the registry
			names := make([]string, 0, len(ls))
			for _, in := range ls {
				if auth == nil || auth.allowed(ctx, in.Name, peer) == nil {
					names = append(names, in.Name)
				}
			}
			return names, err
		},
		Open: func(ctx context.Context, name string, peer nbd.Peer) (nbd.Device, error) {
			base, ephemeral := strings.CutSuffix(name, nonPersistentSuffix)
			if auth != nil {
				if err := auth.check(ctx, base, peer); err != nil {
					return nil, err
				}
			}
			if ephemeral {
				return openNonPersistent(ctx, m, np, base)
			}
			v, err := m.Open(ctx, name)
			if err != nil {
				return nil, err
			}
			return sharedVolume{v}, nil
		},
	}
	if auth != nil {
		cfg.TLS, cfg.RequireTLS = auth.tls, true
	}
	srv := nbd.New(cfg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("NBD: listen on %s: %w", addr, err)
	}
	go srv.Serve(ln)
	return &nbdService{srv: srv, addr: ln.Addr().String(), auth: auth}, nil
}

// sharedVolume is a volume served to several connections at once
// (NBD_FLAG_CAN_MULTI_CONN): the connections of one server to a volume
// share its one handle, so they share its journal, read each other's
// completed writes, and a flush on any of them stores every dirty extent
// and commits the map, covering every write completed before it on any.
type sharedVolume struct{ *volume.Volume }

// MultiConn says the volume may be served to several connections.
func (sharedVolume) MultiConn() bool { return true }

// nonPersistentSuffix, after a volume's name in an export name, serves a
// non-persistent attachment of the volume: a clone made for the
// connection and deleted when it ends.
const nonPersistentSuffix = "+np"

// nonPersistent is a clone of a volume made for one NBD connection and
// deleted when it closes. Its flushes return at once (its contents end
// with the connection, whatever a flush stores), and it is not shared
// between connections: each connection to NAME+np has a clone of its own.
type nonPersistent struct {
	*volume.Volume
	m  *volume.Manager
	np npClones
}

// npSet is the gateway registry's record set of the non-persistent
// clones being served: one record per clone, naming the server (its lease
// owner: host and journals' directory) that made it.
const npSet = "volume-np"

// npClones records a server's non-persistent clones, so that a server
// restarted on the same state directory deletes those its crashed
// predecessor left.
type npClones struct {
	gw    *gateway.Gateway
	owner string
}

// removeStale deletes the non-persistent clones made by a server of this
// owner: one that is gone, since the owner's state directory is locked by
// the caller. Failures are logged; the clones stay listed for quilt
// volume rm.
func (np npClones) removeStale(ctx context.Context, m *volume.Manager) {
	recs, err := np.gw.Records(ctx, npSet)
	if err != nil {
		slog.Warn("volume: non-persistent clones of a previous server", "err", err)
		return
	}
	for name, owner := range recs {
		if string(owner) != np.owner {
			continue
		}
		if err := m.Remove(ctx, name); err != nil && !errors.Is(err, volume.ErrNotFound) {
			slog.Warn("volume: non-persistent clone of a previous server", "name", name, "err", err)
			continue
		}
		np.gw.DeleteRecord(ctx, npSet, name)
	}
}

// openNonPersistent clones base as NAME.np-RANDOM, records the clone as
// this server's, and opens it.
func openNonPersistent(ctx context.Context, m *volume.Manager, np npClones, base string) (nbd.Device, error) {
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s.np-%x", base, r)
	if err := np.gw.PutRecord(ctx, npSet, name, []byte(np.owner)); err != nil {
		return nil, err
	}
	if err := m.Clone(ctx, base, name, false); err != nil {
		np.gw.DeleteRecord(ctx, npSet, name)
		return nil, err
	}
	v, err := m.Open(ctx, name)
	if err != nil {
		m.Remove(ctx, name)
		np.gw.DeleteRecord(ctx, npSet, name)
		return nil, err
	}
	return nonPersistent{v, m, np}, nil
}

// Flush returns at once: what the clone holds is dropped at Close.
func (nonPersistent) Flush(context.Context) error { return nil }

// Close closes the clone and deletes it.
func (n nonPersistent) Close() error {
	name := n.Name()
	if err := n.Volume.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.m.Remove(ctx, name); err != nil {
		return fmt.Errorf("non-persistent clone %s: %w", name, err)
	}
	return n.np.gw.DeleteRecord(ctx, npSet, name)
}

// Close stops serving; connected clients' writes are flushed.
func (ns *nbdService) Close() error {
	err := ns.srv.Close()
	if ns.release != nil {
		ns.release()
	}
	return err
}

// startUpNBD serves the volumes of quilt up's gateway on addr, with
// journals in dir/volumes, and writes dir/nbd.env.
func startUpNBD(ctx context.Context, s *session, gw *gateway.Gateway, dir, addr, tlsMode string) (*nbdService, error) {
	happy, err := volumeHappy(ctx, s)
	if err != nil {
		return nil, err
	}
	auth, err := newNBDAuth(gw, dir, addr, tlsMode)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, "volumes")
	release, err := lockDir(state)
	if err != nil {
		return nil, err
	}
	m, err := volume.New(volume.Config{Catalog: registryCatalog{gw, volumeSet}, Objects: s.objects, Params: codec.DefaultParams(),
		Happy: happy, StateDir: state, Leases: registryCatalog{gw, leaseSet}, LeaseOwner: leaseOwner(state)})
	if err != nil {
		release()
		return nil, err
	}
	ns, err := listenNBD(ctx, m, addr, auth, npClones{gw, leaseOwner(state)})
	if err != nil {
		release()
		return nil, err
	}
	ns.release = release
	env := fmt.Sprintf("export QUILT_NBD=%s\n", ns.url())
	if auth != nil {
		env += fmt.Sprintf("export QUILT_NBD_CA=%s\n", auth.caFile)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "nbd.env"), []byte(env), 0o600); err != nil {
		ns.Close()
		return nil, err
	}
	return ns, nil
}

// leaseOwner names a server in its volumes' leases by its host and its
// locked journals' directory: a server restarted on it takes over the
// leases of the one that crashed without waiting for them to run out.
func leaseOwner(state string) string {
	host, _ := os.Hostname()
	if abs, err := filepath.Abs(state); err == nil {
		state = abs
	}
	return host + ":" + state
}

// nbdHint is quilt up's banner line for the NBD server.
func nbdHint(ns *nbdService) string {
	if ns.auth != nil {
		return fmt.Sprintf("NBD:   %s/NAME  (block volumes; TLS required, server certificate from the CA %s)\n       quilt volume create vm1 --size 10GiB; quilt volume cert vm1 DIR; nbdinfo '%s/vm1?tls-certificates=DIR'\n",
			ns.url(), ns.auth.caFile, ns.url())
	}
	return fmt.Sprintf("NBD:   %s/NAME  (block volumes)\n       quilt volume create vm1 --size 10GiB; nbdinfo %s/vm1\n", ns.url(), ns.url())
}
