package tahoe

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// ErrNotFound is returned by Stat for a name the directory does not hold.
var ErrNotFound = errors.New("tahoe: no such file")

// SFTP is Tahoe-LAFS's own SFTP front end, running in a Grid's client
// node (see EnableSFTP).
type SFTP struct {
	Addr string // "127.0.0.1:port"
	User string
	// Root is the write capability of the directory User sees as "/".
	Root string
	// HostKey is the server's host key, for a known_hosts line.
	HostKey ssh.PublicKey
}

// EnableSFTP gives the client node its SFTP server, as the Tahoe-LAFS
// paper's client had: it makes a new directory in the grid (the web API's
// POST /uri?t=mkdir), writes an Ed25519 host key and an accounts file
// that lets user log in with key and see that directory as "/", and
// restarts the client node with an [sftpd] section listening on a
// loopback port (Tahoe reads the accounts file only when it starts). It
// returns once the client is connected to every storage node again and
// the SFTP port accepts connections, at most Options.StartTimeout later.
func (g *Grid) EnableSFTP(ctx context.Context, user string, key ssh.PublicKey) (*SFTP, error) {
	root, err := g.Mkdir(ctx)
	if err != nil {
		return nil, err
	}
	line, err := accountLine(user, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))), root)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(g.opt.Dir, "client")
	priv := filepath.Join(dir, "private", "ssh_host_ed25519_key")
	pub := priv + ".pub"
	hostKey, err := writeHostKey(priv, pub)
	if err != nil {
		return nil, err
	}
	ports, release, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	release()
	if err := os.WriteFile(filepath.Join(dir, "private", "accounts"), []byte(line), 0o600); err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
	}
	c := g.client
	c.SFTP = &sftpConfig{Port: ports[0], HostPub: pub, HostPriv: priv, Accounts: filepath.Join("private", "accounts")}
	if err := g.restartClient(ctx, c); err != nil {
		return nil, err
	}
	s := &SFTP{Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), User: user, Root: root, HostKey: hostKey}
	err = g.poll(ctx, "the SFTP port", func() (bool, error) {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	g.logf("SFTP front end at %s for %s", s.Addr, user)
	return s, nil
}

// writeHostKey makes an Ed25519 key and writes its private half (OpenSSH
// form, which Twisted Conch reads) to priv and its public half
// (authorized_keys form) to pub.
func writeHostKey(priv, pub string) (ssh.PublicKey, error) {
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
	}
	blk, err := ssh.MarshalPrivateKey(sk, "")
	if err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
	}
	spk, err := ssh.NewPublicKey(pk)
	if err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
	}
	if err := os.WriteFile(priv, pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
	}
	if err := os.WriteFile(pub, ssh.MarshalAuthorizedKey(spk), 0o644); err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
	}
	return spk, nil
}

// restartClient stops the client node, rewrites its configuration as c
// (its keys stay) and starts it again, then waits as Start does until it
// is connected to every storage node.
func (g *Grid) restartClient(ctx context.Context, c nodeConfig) error {
	g.mu.Lock()
	i := slices.IndexFunc(g.procs, func(p *process) bool { return p.name == "client" })
	if i < 0 {
		g.mu.Unlock()
		return fmt.Errorf("tahoe: no client node running")
	}
	old := g.procs[i]
	g.procs = slices.Delete(g.procs, i, i+1)
	g.mu.Unlock()
	if err := old.stop(); err != nil {
		return err
	}
	g.client = c
	g.deadline = time.Now().Add(g.opt.StartTimeout)
	if err := g.run(c, "client", g.furl); err != nil {
		return err
	}
	// The web API answers as soon as the node is up, before it has
	// heard of the storage nodes; wait for them as Start does.
	return g.waitConnected(ctx)
}

// Mkdir makes a new, empty mutable directory in the grid through the
// client's web API (POST /uri?t=mkdir) and returns its write capability.
func (g *Grid) Mkdir(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.web+"/uri?t=mkdir", nil)
	if err != nil {
		return "", fmt.Errorf("tahoe: mkdir: %w", err)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("tahoe: mkdir: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("tahoe: mkdir: %w", err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("%w: POST /uri?t=mkdir: %s: %s", ErrWebAPI, resp.Status, snippet(body))
	}
	cap := strings.TrimSpace(string(body))
	if !strings.HasPrefix(cap, "URI:DIR2:") {
		return "", fmt.Errorf("%w: POST /uri?t=mkdir answered %q, not a directory capability", ErrWebAPI, snippet(body))
	}
	return cap, nil
}

// FileInfo is what the web API says of a file in a directory.
type FileInfo struct {
	Size int64
	// ReadCap is the file's read capability: a new one for every
	// version of an immutable file with other contents.
	ReadCap string
}

// Stat returns what the directory dircap holds under name (one path
// element), through the web API (GET /uri/DIRCAP/NAME?t=json), or an
// error wrapping ErrNotFound if it holds nothing there.
func (g *Grid) Stat(ctx context.Context, dircap, name string) (FileInfo, error) {
	u := g.web + "/uri/" + url.PathEscape(dircap) + "/" + url.PathEscape(name) + "?t=json"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return FileInfo{}, fmt.Errorf("tahoe: stat: %w", err)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return FileInfo{}, fmt.Errorf("tahoe: stat: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return FileInfo{}, fmt.Errorf("tahoe: stat: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return FileInfo{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if resp.StatusCode != http.StatusOK {
		return FileInfo{}, fmt.Errorf("%w: GET %s?t=json: %s: %s", ErrWebAPI, name, resp.Status, snippet(body))
	}
	return parseFileJSON(body)
}

// parseFileJSON reads the web API's JSON of a file node:
// ["filenode", {"size": N, "ro_uri": "URI:CHK:...", ...}].
func parseFileJSON(b []byte) (FileInfo, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 2 {
		return FileInfo{}, fmt.Errorf("%w: not a [type, details] node: %s", ErrWebAPI, snippet(b))
	}
	var kind string
	if err := json.Unmarshal(raw[0], &kind); err != nil {
		return FileInfo{}, fmt.Errorf("%w: node type: %v", ErrWebAPI, err)
	}
	if kind != "filenode" {
		return FileInfo{}, fmt.Errorf("%w: a %s, not a file", ErrWebAPI, kind)
	}
	var d struct {
		Size  *int64 `json:"size"`
		ROURI string `json:"ro_uri"`
	}
	if err := json.Unmarshal(raw[1], &d); err != nil {
		return FileInfo{}, fmt.Errorf("%w: file details: %v", ErrWebAPI, err)
	}
	if d.Size == nil || d.ROURI == "" {
		return FileInfo{}, fmt.Errorf("%w: file details without size or ro_uri: %s", ErrWebAPI, snippet(raw[1]))
	}
	return FileInfo{Size: *d.Size, ReadCap: d.ROURI}, nil
}

// Active returns how many operations (uploads, downloads, mutable
// publishes, retrieves and server-map updates) the client node has in
// progress, from its status page (GET /status?t=json). It asks the
// client node only, not the grid: a cheap way to wait until an SFTP
// close has finished uploading and linking its file before asking the
// grid with Stat.
func (g *Grid) Active(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.web+"/status?t=json", nil)
	if err != nil {
		return 0, fmt.Errorf("tahoe: status: %w", err)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("tahoe: status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, fmt.Errorf("tahoe: status: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: GET /status?t=json: %s: %s", ErrWebAPI, resp.Status, snippet(body))
	}
	return parseActive(body)
}

// parseActive counts the active operations in the status page's JSON:
// {"active": [...], "recent": [...]}.
func parseActive(b []byte) (int, error) {
	var st struct {
		Active *[]json.RawMessage `json:"active"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("%w: status: %v", ErrWebAPI, err)
	}
	if st.Active == nil {
		return 0, fmt.Errorf("%w: status without an active list: %s", ErrWebAPI, snippet(b))
	}
	return len(*st.Active), nil
}
