package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/quilt-grid/quilt/internal/nbd"
	"github.com/quilt-grid/quilt/internal/volume"
)

// Image formats of quilt volume import and export. Raw images are copied
// here; qcow2 ones are converted by qemu-img (QEMU's own converter, which
// knows every qcow2 feature), reading or writing the volume over NBD
// from a server of this process on a Unix socket.
const (
	formatRaw   = "raw"
	formatQcow2 = "qcow2"
)

// qcow2Magic starts a qcow2 file ("QFI\xfb").
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// qcow2Header is what import checks of a qcow2 image: its virtual size,
// and that it reads nothing outside itself.
type qcow2Header struct {
	size int64
}

// readQcow2Header reads the header of the qcow2 image in f. An image with
// a backing file or an external data file is refused: qemu-img would read
// those files of this host into the volume (a path in an image is not
// the importer's to trust).
func readQcow2Header(f *os.File) (qcow2Header, error) {
	h := make([]byte, 104)
	n, err := f.ReadAt(h, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return qcow2Header{}, err
	}
	if n < 72 || !bytes.Equal(h[:4], qcow2Magic) {
		return qcow2Header{}, fmt.Errorf("%s: not a qcow2 image", f.Name())
	}
	version := binary.BigEndian.Uint32(h[4:])
	if version != 2 && version != 3 {
		return qcow2Header{}, fmt.Errorf("%s: qcow2 version %d (want 2 or 3)", f.Name(), version)
	}
	if binary.BigEndian.Uint64(h[8:]) != 0 {
		return qcow2Header{}, fmt.Errorf("%s: a qcow2 image with a backing file is not imported: flatten it first (qemu-img convert -O qcow2)", f.Name())
	}
	if version == 3 && n >= 80 && binary.BigEndian.Uint64(h[72:])&(1<<2) != 0 {
		return qcow2Header{}, fmt.Errorf("%s: a qcow2 image with an external data file is not imported", f.Name())
	}
	size := binary.BigEndian.Uint64(h[24:])
	if size == 0 || size > volume.MaxSize {
		return qcow2Header{}, fmt.Errorf("%s: qcow2 virtual size %d", f.Name(), size)
	}
	return qcow2Header{size: int64(size)}, nil
}

// qemuImg returns the path of qemu-img, or an error saying how to get it.
func qemuImg() (string, error) {
	p, err := exec.LookPath("qemu-img")
	if err != nil {
		return "", errors.New("qcow2 images need qemu-img (Debian: apt install qemu-utils)")
	}
	return p, nil
}

// readOnlyVolume serves a volume's committed contents read-only.
type readOnlyVolume struct{ *volume.Volume }

// ReadOnly says the export is read-only.
func (readOnlyVolume) ReadOnly() bool { return true }

// serveLocal serves volume name of m alone, on a Unix socket in dir, for
// qemu-img; it returns the export's nbd+unix URI and a function that stops
// the server.
func serveLocal(m *volume.Manager, name, dir string, readOnly bool) (string, func(), error) {
	sock := filepath.Join(dir, "nbd.sock")
	srv := nbd.New(nbd.Config{
		Exports: func(context.Context, nbd.Peer) ([]string, error) { return []string{name}, nil },
		Open: func(ctx context.Context, n string, _ nbd.Peer) (nbd.Device, error) {
			if n != name {
				return nil, fmt.Errorf("no export %q", n)
			}
			v, err := m.Open(ctx, name)
			if err != nil {
				return nil, err
			}
			if readOnly {
				return readOnlyVolume{v}, nil
			}
			return v, nil
		},
	})
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return "", nil, err
	}
	go srv.Serve(ln)
	return "nbd+unix:///" + name + "?socket=" + sock, func() { srv.Close() }, nil
}

// runQemuImg runs qemu-img with args, its error output in the error.
func runQemuImg(ctx context.Context, args ...string) error {
	bin, err := qemuImg()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("qemu-img %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// imageFormat returns the format of the image in f as format says: raw,
// qcow2, or auto (qcow2 if it starts with qcow2's magic, else raw).
func imageFormat(f *os.File, format string) (string, error) {
	switch format {
	case formatRaw, formatQcow2:
		return format, nil
	case "auto", "":
		magic := make([]byte, 4)
		if n, _ := f.ReadAt(magic, 0); n == 4 && bytes.Equal(magic, qcow2Magic) {
			return formatQcow2, nil
		}
		return formatRaw, nil
	}
	return "", fmt.Errorf("--format %q: want raw, qcow2 or auto", format)
}

// spoolStdin copies standard input into a file in dir, for an import from
// "-": the volume's size, and qcow2, need the whole image.
func spoolStdin(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "stdin-")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, os.Stdin); err != nil {
		f.Close()
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// volumeImportQcow2 converts the qcow2 image f into volume name (made at
// the image's virtual size if missing), through qemu-img and a server of
// the volume on a Unix socket in dir.
func volumeImportQcow2(ctx context.Context, m *volume.Manager, name string, f *os.File, dir string) error {
	h, err := readQcow2Header(f)
	if err != nil {
		return err
	}
	if _, err := qemuImg(); err != nil {
		return err
	}
	made := false
	if _, err := m.Stat(ctx, name); errors.Is(err, volume.ErrNotFound) {
		if err := m.Create(ctx, name, (h.size+volume.Sector-1)/volume.Sector*volume.Sector); err != nil {
			return err
		}
		made = true
	} else if err != nil {
		return err
	}
	in, err := m.Stat(ctx, name)
	if err != nil {
		return err
	}
	if h.size > in.Size {
		return fmt.Errorf("%s has a virtual size of %d bytes, volume %s only %d", f.Name(), h.size, name, in.Size)
	}
	// The volume's handle stays open across qemu-img's connections, so its
	// writer's lease is held throughout, and its last Close flushes.
	v, err := m.Open(ctx, name)
	if err != nil {
		return err
	}
	defer v.Close()
	uri, stop, err := serveLocal(m, name, dir, false)
	if err != nil {
		return err
	}
	defer stop()
	args := []string{"convert", "-n", "-f", formatQcow2, "-O", formatRaw}
	if made {
		args = append(args, "--target-is-zero") // a new volume reads zeros: skip writing them
	}
	if err := runQemuImg(ctx, append(args, f.Name(), uri)...); err != nil {
		return err
	}
	stop()
	return v.Flush(ctx)
}

// volumeExportQcow2 writes volume name's committed contents to the qcow2
// image file, through qemu-img reading a read-only server of the volume
// on a Unix socket in dir.
func volumeExportQcow2(ctx context.Context, m *volume.Manager, name, file, dir string) error {
	if file == "-" {
		return errors.New("a qcow2 export needs a file, not standard output (qcow2 is written out of order)")
	}
	if _, err := m.Stat(ctx, name); err != nil {
		return err
	}
	uri, stop, err := serveLocal(m, name, dir, true)
	if err != nil {
		return err
	}
	defer stop()
	return runQemuImg(ctx, "convert", "-f", formatRaw, "-O", formatQcow2, uri, file)
}
