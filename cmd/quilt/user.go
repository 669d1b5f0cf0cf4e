package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/quilt-grid/quilt/internal/gateway"
	"golang.org/x/term"
)

const userUsage = `Usage: quilt user add NAME [--password P] [--admin] [--quota SIZE] [--group G ...] [--home BUCKET]
       quilt user list
       quilt user passwd NAME [--password P]
       quilt user set NAME [--admin=true|false] [--quota SIZE] [--group G ...]
       quilt user rm NAME [--purge]
       quilt user group add|rm GROUP
       quilt user group list
       quilt user group join|leave GROUP USER...
       quilt user app-password add NAME LABEL
       quilt user app-password list NAME
       quilt user app-password rm NAME ID

Manages the accounts of the gateway in --dir (the one 'quilt up' runs,
by default): the people who log in to WebDAV and the web app. Each user
gets a home drive, the bucket home-NAME (or --home BUCKET), and an S3
access key that owns it, printed once by 'add' as "KEY_ID SECRET": what
they save over WebDAV is read over S3 with that key, and the other way
round. Without --password, the password is asked for twice on a terminal
(no echo), or read as one line from standard input. --quota bounds the
bytes of the home (100MiB, 5GiB; 0: no limit); a write past it is refused
(WebDAV 507, S3 403 QuotaExceeded). 'rm' removes the login and the S3
key and keeps the home bucket and its files (an admin key still reaches
them; 'quilt user add NAME --home home-NAME' gives them back); --purge
deletes them too. App passwords are for clients (sync clients, phones):
each logs in as the password does, is shown once, and is revoked by
'app-password rm'. --group makes the groups named if they are missing;
'set --group' replaces the user's groups. Changes reach the running
gateway within a second. See docs/files.md.`

func runUser(ctx context.Context, args []string) error {
	fs := newFlagSet("user", userUsage)
	var g gridFlags
	g.register(fs)
	dir := fs.String("dir", "", "gateway state directory (default: the gateway 'quilt up' runs for the default grid, else $QUILT_HOME/gateway as for 'quilt gateway')")
	password := fs.String("password", "", "add, passwd: the password (default: asked for, or read from standard input)")
	admin := fs.Bool("admin", false, "add, set: the user is an admin (of the web app)")
	quota := fs.String("quota", "", "add, set: the most bytes the home may hold (100MiB, 5GiB; 0: no limit)")
	home := fs.String("home", "", "add: give the user this bucket (made if missing) instead of a new home-NAME")
	purge := fs.Bool("purge", false, "rm: delete the user's home bucket and its files too")
	var groups multiFlag
	fs.Var(&groups, "group", "add, set: a group of the user (repeatable)")
	if err := parseArgs(fs, args, -1); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	arg := func(i int) string { return fs.Arg(i) }
	want := func(n int) error {
		if fs.NArg() != n {
			fs.Usage()
			return errUsage
		}
		return nil
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	var quotaBytes int64
	if *quota != "" {
		q, err := parseSize(*quota)
		if err != nil {
			return fmt.Errorf("--quota: %w", err)
		}
		quotaBytes = q
	}
	// Check the arguments before connecting.
	switch verb := arg(0); verb {
	case "add", "passwd", "set", "rm":
		if err := want(2); err != nil {
			return err
		}
	case "list":
		if err := want(1); err != nil {
			return err
		}
	case "group":
		if fs.NArg() < 2 {
			fs.Usage()
			return errUsage
		}
	case "app-password":
		if fs.NArg() < 3 {
			fs.Usage()
			return errUsage
		}
	default:
		fs.Usage()
		return errUsage
	}
	if n := arg(1); (arg(0) == "add" || arg(0) == "passwd") && n != "" {
		if err := gateway.CheckName(n); err != nil {
			return err
		}
	}
	pw := *password
	if (arg(0) == "add" || arg(0) == "passwd") && !set["password"] {
		p, err := readNewPassword(arg(1))
		if err != nil {
			return err
		}
		pw = p
	}
	if (arg(0) == "add" || arg(0) == "passwd") && gateway.CheckPassword(pw) != nil {
		return gateway.CheckPassword(pw)
	}
	if *dir == "" {
		*dir = keyDir(g.grid)
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
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	switch arg(0) {
	case "add":
		u, key, err := gw.CreateUser(ctx, gateway.NewUser{Name: arg(1), Password: pw, Admin: *admin, Quota: quotaBytes, Groups: groups, Home: *home})
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", key.ID, key.Secret)
		fmt.Fprintf(os.Stderr, "user %s made, home bucket %s%s\n(above: the S3 access key ID and secret of the home; the secret is shown once here)\n",
			u.Name, u.Home, quotaNote(u.Quota))
		if b, err := os.ReadFile(filepath.Join(*dir, "webdav.env")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if url, ok := strings.CutPrefix(line, "export QUILT_WEBDAV_URL="); ok {
					fmt.Fprintf(os.Stderr, "WebDAV: %s%s/\n", url, u.Name)
				}
			}
		}
	case "list":
		us, err := gw.Users(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "NAME\tADMIN\tHOME\tUSED\tQUOTA\tGROUPS\tS3 KEY\tAPP PASSWORDS\tCREATED")
		for _, u := range us {
			used := "-"
			if n, err := gw.Usage(ctx, u.Home); err == nil {
				used = human(n)
			}
			q := "none"
			if u.Quota > 0 {
				q = human(u.Quota)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", u.Name, yesNo(u.Admin), u.Home, used, q,
				orDash(strings.Join(u.Groups, ",")), u.KeyID, len(u.AppPasswords), u.Created.Format("2006-01-02 15:04"))
		}
		return tw.Flush()
	case "passwd":
		if err := gw.SetPassword(ctx, arg(1), pw); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "password of %s changed; the old one no longer logs in\n", arg(1))
	case "set":
		var c gateway.UserChange
		if set["admin"] {
			c.Admin = admin
		}
		if set["quota"] {
			c.Quota = &quotaBytes
		}
		if set["group"] {
			gs := []string(groups)
			c.Groups = &gs
		}
		if c.Admin == nil && c.Quota == nil && c.Groups == nil {
			return errors.New("set: nothing to change (--admin, --quota, --group)")
		}
		u, err := gw.UpdateUser(ctx, arg(1), c)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "user %s: admin %s, quota %s, groups %s\n", u.Name, yesNo(u.Admin), strings.TrimPrefix(quotaNote(u.Quota), ", quota "), orDash(strings.Join(u.Groups, ",")))
	case "rm":
		u, err := gw.User(ctx, arg(1))
		if err != nil {
			return err
		}
		if err := gw.DeleteUser(ctx, arg(1), *purge); err != nil {
			return err
		}
		if *purge {
			fmt.Fprintf(os.Stderr, "user %s removed, with their S3 key and their home bucket %s and its files\n", u.Name, u.Home)
		} else {
			fmt.Fprintf(os.Stderr, "user %s removed, with their S3 key; their home bucket %s and its files are kept\n(an admin key reaches them; 'quilt user add %s --home %s' gives them back, 'quilt user rm --purge' would have deleted them)\n", u.Name, u.Home, u.Name, u.Home)
		}
	case "group":
		return runUserGroup(ctx, gw, fs, tw)
	case "app-password":
		return runAppPassword(ctx, gw, fs, tw)
	}
	return nil
}

func runUserGroup(ctx context.Context, gw *gateway.Gateway, fs *flag.FlagSet, tw *tabwriter.Writer) error {
	switch verb := fs.Arg(1); {
	case verb == "add" && fs.NArg() == 3:
		return gw.CreateGroup(ctx, fs.Arg(2))
	case verb == "rm" && fs.NArg() == 3:
		return gw.DeleteGroup(ctx, fs.Arg(2))
	case verb == "list" && fs.NArg() == 2:
		gs, err := gw.Groups(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "GROUP\tMEMBERS")
		for _, gr := range gs {
			fmt.Fprintf(tw, "%s\t%s\n", gr.Name, orDash(strings.Join(gr.Members, ",")))
		}
		return tw.Flush()
	case (verb == "join" || verb == "leave") && fs.NArg() >= 4:
		return gw.SetMembership(ctx, fs.Arg(2), fs.Args()[3:], verb == "join")
	}
	fs.Usage()
	return errUsage
}

func runAppPassword(ctx context.Context, gw *gateway.Gateway, fs *flag.FlagSet, tw *tabwriter.Writer) error {
	switch verb := fs.Arg(1); {
	case verb == "add" && fs.NArg() == 4:
		ap, secret, err := gw.AddAppPassword(ctx, fs.Arg(2), fs.Arg(3))
		if err != nil {
			return err
		}
		fmt.Println(secret)
		fmt.Fprintf(os.Stderr, "app password %s (%q) of %s: above, shown once; it logs in as %s does\n", ap.ID, ap.Label, fs.Arg(2), fs.Arg(2))
		return nil
	case verb == "list" && fs.NArg() == 3:
		u, err := gw.User(ctx, fs.Arg(2))
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "ID\tLABEL\tCREATED")
		for _, a := range u.AppPasswords {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", a.ID, a.Label, a.Created.Format("2006-01-02 15:04"))
		}
		return tw.Flush()
	case verb == "rm" && fs.NArg() == 4:
		return gw.RemoveAppPassword(ctx, fs.Arg(2), fs.Arg(3))
	}
	fs.Usage()
	return errUsage
}

// readNewPassword asks for a new password twice on a terminal, without
// echo, or reads one line of standard input when it is not one.
func readNewPassword(name string) (string, error) {
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return "", errors.New("no password: give --password, or one line on standard input")
		}
		return line, nil
	}
	ask := func(prompt string) (string, error) {
		fmt.Fprint(os.Stderr, prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		return string(b), err
	}
	p1, err := ask(fmt.Sprintf("new password of %s: ", name))
	if err != nil {
		return "", err
	}
	if err := gateway.CheckPassword(p1); err != nil {
		return "", err
	}
	p2, err := ask("again: ")
	if err != nil {
		return "", err
	}
	if p1 != p2 {
		return "", errors.New("the two passwords differ")
	}
	return p1, nil
}

func quotaNote(q int64) string {
	if q <= 0 {
		return ", quota none"
	}
	return ", quota " + human(q)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
