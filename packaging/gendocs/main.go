// Command gendocs writes what the packages ship beside the binary, from
// the same cobra definitions as `leaseside --help`: a man page for
// leaseside and for each of its subcommands (gzipped, for
// /usr/share/man/man1), and the bash, zsh and fish completion scripts.
// `make package` runs it:
//
//	go run ./packaging/gendocs -version 1.2.3 -out dist/share
//
// writes OUT/man/*.1.gz and OUT/completions/{leaseside.bash,_leaseside,leaseside.fish}.
// The man pages are dated by $SOURCE_DATE_EPOCH when it is set, so that
// one commit packs the same way twice.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/leaseside/leaseside/cmd/leaseside/cli"
)

func main() {
	version := flag.String("version", cli.Version, "the version the pages name")
	out := flag.String("out", "", "the directory to write man/ and completions/ into (required)")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: gendocs -out DIR [-version V]")
		os.Exit(2)
	}
	if err := generate(*out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func generate(out, version string) error {
	cli.Version = version
	root := cli.NewRootCommand(io.Discard, io.Discard)
	date := time.Now()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		date = time.Unix(sec, 0).UTC()
	}
	man := filepath.Join(out, "man")
	if err := os.MkdirAll(man, 0o755); err != nil {
		return err
	}
	if err := writeMan(root, man, &doc.GenManHeader{Section: "1", Date: &date, Source: "leaseside " + version, Manual: "leaseside manual"}); err != nil {
		return err
	}
	comp := filepath.Join(out, "completions")
	if err := os.MkdirAll(comp, 0o755); err != nil {
		return err
	}
	for name, gen := range map[string]func(io.Writer) error{
		"leaseside.bash": func(w io.Writer) error { return root.GenBashCompletionV2(w, true) },
		"_leaseside":     root.GenZshCompletion,
		"leaseside.fish": func(w io.Writer) error { return root.GenFishCompletion(w, true) },
	} {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(comp, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeMan writes the man page of cmd and of every command below it as
// DIR/leaseside-SUB-....1.gz, compressed without a name or a time in the
// gzip header.
func writeMan(cmd *cobra.Command, dir string, header *doc.GenManHeader) error {
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := writeMan(c, dir, header); err != nil {
			return err
		}
	}
	h := *header // GenMan fills in the title
	var page bytes.Buffer
	if err := doc.GenMan(cmd, &h, &page); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	name := filepath.Join(dir, manName(cmd))
	var z bytes.Buffer
	zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.Write(page.Bytes())
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(name, z.Bytes(), 0o644)
}

// manName is the page's file name: the command path with dashes.
func manName(cmd *cobra.Command) string {
	name := cmd.Name()
	for p := cmd.Parent(); p != nil; p = p.Parent() {
		name = p.Name() + "-" + name
	}
	return name + ".1.gz"
}
