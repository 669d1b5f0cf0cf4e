package tahoe

import (
	"errors"
	"strings"
	"testing"
)

// TestSFTPConfig: a client with SFTP gets an [sftpd] section on a
// loopback port with its key files and accounts file; a storage node or
// a client without SFTP gets none.
func TestSFTPConfig(t *testing.T) {
	s := &sftpConfig{Port: 4022, HostPub: "/n/private/k.pub", HostPriv: "/n/private/k", Accounts: "private/accounts"}
	kv := parseCfg(t, nodeConfig{Role: clientRole, WebPort: 1, K: 3, N: 10, Happy: 7, SFTP: s}.tahoeCfg())
	for k, want := range map[string]string{
		"sftpd.enabled":           "true",
		"sftpd.port":              "tcp:4022:interface=127.0.0.1",
		"sftpd.host_pubkey_file":  "/n/private/k.pub",
		"sftpd.host_privkey_file": "/n/private/k",
		"sftpd.accounts.file":     "private/accounts",
	} {
		if got, ok := kv[k]; !ok || got != want {
			t.Errorf("%s = %q (set: %v), want %q", k, got, ok, want)
		}
	}
	for _, c := range []nodeConfig{
		{Role: clientRole, WebPort: 1, K: 3, N: 10, Happy: 7},
		{Role: storageRole, TubPort: 2, SFTP: s},
	} {
		if cfg := c.tahoeCfg(); strings.Contains(cfg, "[sftpd]") {
			t.Errorf("role %v, SFTP %v: has [sftpd]:\n%s", c.Role, c.SFTP != nil, cfg)
		}
	}
}

// TestAccountLine: the accounts file line Tahoe-LAFS 1.20 parses
// (allmydata/frontends/auth.py: NAME KEYTYPE KEY ROOTCAP), and refusals
// of what it would misread.
func TestAccountLine(t *testing.T) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyFakeKeyFakeKeyFakeKeyFakeKeyFakeKey"
	const root = "URI:DIR2:abc:def"
	got, err := accountLine("lab", key+" comment here", root)
	if err != nil {
		t.Fatal(err)
	}
	if want := "lab " + key + " " + root + "\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, c := range []struct{ user, key, root string }{
		{"", key, root},
		{"two words", key, root},
		{"#lab", key, root},
		{"lab", "password", root},
		{"lab", "ssh-ed25519", root},
		{"lab", key, "URI:CHK:abc"},
		{"lab", key, "URI:DIR2:a b"},
	} {
		if _, err := accountLine(c.user, c.key, c.root); !errors.Is(err, ErrOptions) {
			t.Errorf("%q %q %q: got %v, want ErrOptions", c.user, c.key, c.root, err)
		}
	}
}

// TestParseFileJSON reads the web API's JSON of a file node (as
// Tahoe-LAFS 1.20 writes it) and refuses a directory or a broken one.
func TestParseFileJSON(t *testing.T) {
	fi, err := parseFileJSON([]byte(`[
 "filenode",
 {
  "mutable": false,
  "verify_uri": "URI:CHK-Verifier:aaa:bbb:3:10:1048576",
  "format": "CHK",
  "ro_uri": "URI:CHK:ccc:ddd:3:10:1048576",
  "size": 1048576,
  "metadata": {"tahoe": {"linkmotime": 1.7e9, "linkcrtime": 1.7e9}}
 }
]`))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != 1048576 || fi.ReadCap != "URI:CHK:ccc:ddd:3:10:1048576" {
		t.Errorf("got %+v", fi)
	}
	for _, bad := range []string{
		`["dirnode", {"ro_uri": "URI:DIR2-RO:x", "children": {}}]`,
		`["filenode", {"ro_uri": "URI:CHK:x"}]`,
		`["filenode", {"size": 3}]`,
		`["filenode"]`,
		`{"size": 3}`,
		`<html>Error</html>`,
	} {
		if _, err := parseFileJSON([]byte(bad)); !errors.Is(err, ErrWebAPI) {
			t.Errorf("%s: got %v, want ErrWebAPI", bad, err)
		}
	}
}

// TestParseActive counts the active operations of the status page.
func TestParseActive(t *testing.T) {
	n, err := parseActive([]byte(`{"active": [{"type": "upload", "total-size": 5}, {"type": "publish"}], "recent": [{"type": "mapupdate"}]}`))
	if err != nil || n != 2 {
		t.Errorf("got %d, %v; want 2", n, err)
	}
	if n, err := parseActive([]byte(`{"active": [], "recent": []}`)); err != nil || n != 0 {
		t.Errorf("got %d, %v; want 0", n, err)
	}
	for _, bad := range []string{`{"recent": []}`, `[]`, `not json`} {
		if _, err := parseActive([]byte(bad)); !errors.Is(err, ErrWebAPI) {
			t.Errorf("%s: got %v, want ErrWebAPI", bad, err)
		}
	}
}
