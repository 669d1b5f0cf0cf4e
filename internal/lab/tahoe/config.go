package tahoe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// role is what a node of the grid does.
type role int

const (
	introducerRole role = iota
	storageRole
	clientRole
)

// nodeConfig is everything that goes into one node's directory.
type nodeConfig struct {
	Role     role
	Nickname string
	// TubPort is the loopback port the node's tub listens on, for Foolscap
	// and the HTTPS storage protocol alike. The client listens on none.
	TubPort int
	// Location is the "host:port" the node announces (tub.location): the
	// address of a linkemu Proxy in front of it, say. "" is
	// 127.0.0.1:TubPort.
	Location string
	// WebPort is the loopback port of the web API; 0 is none.
	WebPort int
	// K, N and Happy are the client's encoding (shares.needed,
	// shares.total, shares.happy).
	K, N, Happy int
	// Foolscap makes the node speak only Foolscap for storage
	// (force_foolscap), the protocol of Tahoe-LAFS before 1.19.
	Foolscap bool
	// SFTP, if set, enables the client's SFTP front end ([sftpd]).
	SFTP *sftpConfig
}

// sftpConfig is the [sftpd] section of a client node: Tahoe's own SFTP
// server (allmydata/frontends/sftpd.py), which logs users in by public
// key only (allmydata/frontends/auth.py) and gives each the directory
// its accounts file names as "/".
type sftpConfig struct {
	Port int // loopback port it listens on
	// HostPub and HostPriv are the paths of the host key's public half
	// (authorized_keys form) and private half (OpenSSH form); Tahoe opens
	// them relative to its working directory, so they are absolute.
	HostPub, HostPriv string
	// Accounts is the accounts file, relative to the node directory.
	Accounts string
}

// tahoeCfg returns the text of c's tahoe.cfg: what `tahoe create-node`
// (create-client, create-introducer) would write for the same settings,
// without the comments, and without a tahoe start-up per node. Everything
// listens on 127.0.0.1 only, and only tcp hints are announced, so no Tor
// or I2P is involved.
func (c nodeConfig) tahoeCfg() string {
	var b strings.Builder
	kv := func(k, v string) {
		if v == "" {
			fmt.Fprintf(&b, "%s =\n", k)
		} else {
			fmt.Fprintf(&b, "%s = %s\n", k, v)
		}
	}
	b.WriteString("# Written by quilt's internal/lab/tahoe.\n\n[node]\n")
	kv("nickname", c.Nickname)
	kv("reveal-IP-address", "true")
	web := ""
	if c.WebPort != 0 {
		web = fmt.Sprintf("tcp:%d:interface=127.0.0.1", c.WebPort)
	}
	kv("web.port", web)
	kv("web.static", "public_html")
	if c.Role == clientRole {
		kv("tub.port", "disabled")
		kv("tub.location", "disabled")
	} else {
		loc := c.Location
		if loc == "" {
			loc = fmt.Sprintf("127.0.0.1:%d", c.TubPort)
		}
		kv("tub.port", fmt.Sprintf("tcp:%d:interface=127.0.0.1", c.TubPort))
		kv("tub.location", "tcp:"+loc)
	}
	if c.Role == introducerRole {
		return b.String()
	}
	b.WriteString("\n[client]\n")
	kv("helper.furl", "")
	if c.Foolscap {
		kv("force_foolscap", "true")
	}
	if c.Role == clientRole {
		kv("shares.needed", fmt.Sprint(c.K))
		kv("shares.happy", fmt.Sprint(c.Happy))
		kv("shares.total", fmt.Sprint(c.N))
	}
	b.WriteString("\n[storage]\n")
	if c.Foolscap {
		kv("force_foolscap", "true")
	}
	if c.Role == storageRole {
		kv("enabled", "true")
		// The lab's disks are scratch space: never refuse a share
		// because less than Tahoe's default 1 GB would be left.
		kv("reserved_space", "0")
	} else {
		kv("enabled", "false")
	}
	b.WriteString("\n[helper]\n")
	kv("enabled", "false")
	if c.Role == clientRole && c.SFTP != nil {
		b.WriteString("\n[sftpd]\n")
		kv("enabled", "true")
		kv("port", fmt.Sprintf("tcp:%d:interface=127.0.0.1", c.SFTP.Port))
		kv("host_pubkey_file", c.SFTP.HostPub)
		kv("host_privkey_file", c.SFTP.HostPriv)
		kv("accounts.file", c.SFTP.Accounts)
	}
	return b.String()
}

// tacFile returns the name and text of the .tac file by which `tahoe run`
// recognises a node directory's role (the same text `tahoe create-node`
// writes).
func (c nodeConfig) tacFile() (name, text string) {
	name = "tahoe-client.tac"
	if c.Role == introducerRole {
		name = "tahoe-introducer.tac"
	}
	return name, "\nimport sys\n" +
		"print(\"Nodes created by Tahoe-LAFS v1.11.0 or later cannot be run by\")\n" +
		"print(\"releases of Tahoe-LAFS before v1.10.0.\")\n" +
		"sys.exit(1)\n"
}

// introducersYAML returns the text of private/introducers.yaml naming the
// introducer at furl. A furl has no quote characters, so single quotes
// make it a YAML string whatever else it holds.
func introducersYAML(furl string) string {
	return "introducers:\n  default:\n    furl: '" + furl + "'\n"
}

// accountLine is the line of an [sftpd] accounts file that lets user log
// in with the public key authorizedKey (one authorized_keys line, without
// options or comment) and see the directory rootcap as "/". Tahoe-LAFS
// 1.20 takes keys only; password lines are refused at start.
func accountLine(user, authorizedKey, rootcap string) (string, error) {
	if user == "" || strings.ContainsAny(user, " \t\n#") || strings.HasPrefix(user, "#") {
		return "", fmt.Errorf("%w: SFTP user %q: want one word", ErrOptions, user)
	}
	f := strings.Fields(authorizedKey)
	if len(f) < 2 || !strings.HasPrefix(f[0], "ssh-") {
		return "", fmt.Errorf("%w: SFTP key %q: want \"ssh-TYPE BASE64\"", ErrOptions, authorizedKey)
	}
	if !strings.HasPrefix(rootcap, "URI:DIR2:") || strings.ContainsAny(rootcap, " \t\n") {
		return "", fmt.Errorf("%w: SFTP root %q: want a directory write cap (URI:DIR2:...)", ErrOptions, rootcap)
	}
	return user + " " + f[0] + " " + f[1] + " " + rootcap + "\n", nil
}

// writeNode creates the node directory dir for c: tahoe.cfg, the .tac
// file and, unless c is the introducer, private/introducers.yaml with
// furl. Tahoe makes the node's keys itself when it first starts.
func writeNode(dir string, c nodeConfig, furl string) error {
	if err := os.MkdirAll(filepath.Join(dir, "private"), 0o700); err != nil {
		return fmt.Errorf("tahoe: %w", err)
	}
	files := map[string]string{"tahoe.cfg": c.tahoeCfg()}
	tac, text := c.tacFile()
	files[tac] = text
	if c.Role != introducerRole {
		files[filepath.Join("private", "introducers.yaml")] = introducersYAML(furl)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return fmt.Errorf("tahoe: %w", err)
		}
	}
	return nil
}
