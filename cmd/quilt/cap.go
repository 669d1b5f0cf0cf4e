package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/quilt-grid/quilt/internal/codec"
)

func runCap(ctx context.Context, args []string) error {
	fs := newFlagSet("cap", "Usage: quilt cap verify CAP\n\nDerives from a read capability (quilt:r:...) its verify capability\n(quilt:v:...) and prints it. A verify capability lets its holder check and\nrepair the object ('quilt check') but not read it: give it to whoever looks\nafter the grid's health.")
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	if fs.Arg(0) != "verify" {
		fs.Usage()
		return errUsage
	}
	c := strings.TrimSpace(fs.Arg(1))
	if vc, err := codec.ParseVerifyCap(c); err == nil {
		fmt.Println(vc.String()) // already one
		return nil
	}
	rc, err := codec.ParseReadCap(c)
	if err != nil {
		return err
	}
	fmt.Println(rc.Verify().String())
	return nil
}
