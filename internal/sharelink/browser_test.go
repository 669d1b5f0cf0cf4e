package sharelink_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser returns a context of a headless Chromium the size of a phone
// screen, stopped at the end of the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	var exe string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Fatal("no Chromium on PATH (apt-get install chromium): the share pages are tested in a real browser")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(390, 844), chromedp.UserDataDir(t.TempDir()))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatal(err)
	}
	return ctx
}

// TestShareLinksInBrowser opens share links in headless Chromium, using
// the keyboard only: an upload link's form sends two files through its
// script (progress bar and result), which land in the folder; a password
// link's form takes the password, and its cookie then opens the file's
// page. The pages load nothing but what the handler serves (their
// Content-Security-Policy would block the rest).
func TestShareLinksInBrowser(t *testing.T) {
	f := newFixture(t)
	ctx := browser(t)
	f.put("alice-files", "drop/.keep", "")
	f.put("alice-files", "drop/a.txt", "already here")
	f.put("alice-files", "docs/report.txt", "the quarterly report\n")
	up := f.create("alice", map[string]string{"path": "/drop", "mode": "upload"})
	locked := f.create("alice", map[string]string{"path": "/docs/report.txt", "password": "open sesame"})

	dir := t.TempDir()
	files := []string{filepath.Join(dir, "a.txt"), filepath.Join(dir, "photo one.jpg")}
	os.WriteFile(files[0], []byte("sent from a phone"), 0o600)
	os.WriteFile(files[1], []byte(strings.Repeat("jpeg", 5000)), 0o600)

	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if _, err := chromedp.Run(c, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("upload page", chromedp.Steps(
		chromedp.Navigate(up.URL),
		chromedp.WaitVisible(chromedp.ID("files")),
		chromedp.SetUploadFiles(chromedp.ID("files"), files),
		chromedp.Focus(chromedp.CSS("#upload button")),
		chromedp.KeyEvent("\r"),
	))
	c, cancel := context.WithTimeout(ctx, 2*time.Minute)
	res, err := chromedp.Run(c, chromedp.Poll[string](`document.getElementById("result").textContent.indexOf("Uploaded") >= 0 && document.getElementById("result").textContent`, chromedp.WithPollingTimeout(2*time.Minute)))
	cancel()
	if err != nil {
		t.Fatalf("waiting for the upload's result: %v", err)
	}
	if res != "Uploaded: a (1).txt, photo one.jpg" {
		t.Fatalf("the page says %q", res)
	}
	bg := context.Background()
	for p, want := range map[string]string{"drop/a.txt": "already here", "drop/a (1).txt": "sent from a phone", "drop/photo one.jpg": strings.Repeat("jpeg", 5000)} {
		rc, _, err := f.trees["alice-files"].Open(bg, p, 0, -1)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != want {
			t.Fatalf("%s holds %d bytes, want %d", p, len(b), len(want))
		}
	}

	step("password page", chromedp.Steps(
		chromedp.Navigate(locked.URL),
		chromedp.WaitVisible(chromedp.ID("pw")),
		chromedp.SendKeys(chromedp.ID("pw"), "wrong\r"),
		chromedp.WaitVisible(chromedp.CSS(".error")),
	))
	c, cancel = context.WithTimeout(ctx, 2*time.Minute)
	msg, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(".error")))
	cancel()
	if err != nil || msg != "Wrong password." {
		t.Fatalf("after a wrong password the page says %q (%v)", msg, err)
	}
	step("right password", chromedp.Steps(
		chromedp.SendKeys(chromedp.ID("pw"), "open sesame\r"),
		chromedp.WaitVisible(chromedp.CSS("a.button")),
	))
	c, cancel = context.WithTimeout(ctx, 2*time.Minute)
	name, err := chromedp.Run(c, chromedp.Text(chromedp.CSS("h1")))
	cancel()
	if err != nil || name != "report.txt" {
		t.Fatalf("the unlocked page's heading is %q (%v)", name, err)
	}
	// The cookie the browser holds now fetches the file from the page.
	c, cancel = context.WithTimeout(ctx, 2*time.Minute)
	body, err := chromedp.Run(c, chromedp.Evaluate[string](`fetch(document.querySelector("a.button").href).then(r => r.text())`,
		chromedp.EvalAwaitPromise))
	cancel()
	if err != nil || body != "the quarterly report\n" {
		t.Fatalf("download from the unlocked page: %q (%v)", body, err)
	}
}
