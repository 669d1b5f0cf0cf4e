package tahoe

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInterpreter(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		script, want string
	}{
		{"#!/venv/bin/python3\n# -*- coding: utf-8 -*-\nimport sys\n", "/venv/bin/python3"},
		{"#! /venv/bin/python3 \n", "/venv/bin/python3"},
		{"#!/usr/bin/env python3\n", ""}, // not the venv's own interpreter
		{"#!python3\n", ""},
		{"ELF", ""},
	} {
		path := filepath.Join(dir, "tahoe")
		if err := os.WriteFile(path, []byte(tt.script), 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := interpreter(path)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("%q: %q, %v; want %q", tt.script, got, err, tt.want)
		}
	}
	if _, err := interpreter(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing program: no error")
	}
}
