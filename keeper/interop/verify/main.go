// Command verify checks Audita checkpoints, keeper cosignatures and RFC 6962
// consistency proofs with independent implementations only:
// golang.org/x/mod/sumdb/note (signed notes, the log's Ed25519 signature),
// github.com/transparency-dev/formats/note (cosignature/v1, type 0x04),
// filippo.io/torchwood (checkpoint body parsing) and golang.org/x/mod/sumdb/tlog
// (consistency proofs).
//
//	verify -log VKEY [-witness VKEY]... -checkpoint FILE
//	       [-old FILE -proof FILE]
//
// Every -witness key must have a valid cosignature on the checkpoint (and on
// -old, when given). -proof holds one base64 hash a line: the consistency proof
// from -old to -checkpoint. Exit 0 and "ok" when everything verifies; exit 1
// with the reason otherwise.
package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"filippo.io/torchwood"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	logKey := flag.String("log", "", "log verifier key (Ed25519, type 0x01)")
	var witnesses list
	flag.Var(&witnesses, "witness", "witness verifier key (cosignature/v1, type 0x04); repeatable")
	cpFile := flag.String("checkpoint", "", "checkpoint note")
	oldFile := flag.String("old", "", "older checkpoint note (with -proof)")
	proofFile := flag.String("proof", "", "consistency proof from -old to -checkpoint, base64 lines")
	flag.Parse()
	if err := run(*logKey, witnesses, *cpFile, *oldFile, *proofFile); err != nil {
		fmt.Fprintln(os.Stderr, "verify:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
}

func run(logKey string, witnesses []string, cpFile, oldFile, proofFile string) error {
	if logKey == "" || cpFile == "" {
		return errors.New("-log and -checkpoint are required")
	}
	logV, err := note.NewVerifier(logKey)
	if err != nil {
		return fmt.Errorf("log key: %w", err)
	}
	var ws []note.Verifier
	for _, w := range witnesses {
		v, err := fnote.NewVerifierForCosignatureV1(w)
		if err != nil {
			return fmt.Errorf("witness key %q: %w", w, err)
		}
		ws = append(ws, v)
	}
	cp, err := open(cpFile, logV, ws)
	if err != nil {
		return fmt.Errorf("%s: %w", cpFile, err)
	}
	if oldFile == "" {
		return nil
	}
	old, err := open(oldFile, logV, ws)
	if err != nil {
		return fmt.Errorf("%s: %w", oldFile, err)
	}
	if old.Origin != cp.Origin {
		return errors.New("the two checkpoints are of different logs")
	}
	raw, err := os.ReadFile(proofFile)
	if err != nil {
		return err
	}
	var proof tlog.TreeProof
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if line == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(b) != tlog.HashSize {
			return fmt.Errorf("proof line %q is not a base64 hash", line)
		}
		var h tlog.Hash
		copy(h[:], b)
		proof = append(proof, h)
	}
	if err := tlog.CheckTree(proof, cp.N, cp.Hash, old.N, old.Hash); err != nil {
		return fmt.Errorf("consistency proof %d -> %d: %w", old.N, cp.N, err)
	}
	return nil
}

// open verifies the log's signature and every witness's cosignature on a note
// and parses its checkpoint body.
func open(file string, logV note.Verifier, ws []note.Verifier) (torchwood.Checkpoint, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return torchwood.Checkpoint{}, err
	}
	n, err := note.Open(raw, note.VerifierList(append([]note.Verifier{logV}, ws...)...))
	if err != nil {
		return torchwood.Checkpoint{}, err
	}
	for _, v := range append([]note.Verifier{logV}, ws...) {
		found := false
		for _, s := range n.Sigs {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				found = true
			}
		}
		if !found {
			return torchwood.Checkpoint{}, fmt.Errorf("no valid signature of %s", v.Name())
		}
	}
	c, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil {
		return torchwood.Checkpoint{}, err
	}
	if c.Origin != logV.Name() {
		return torchwood.Checkpoint{}, fmt.Errorf("origin %q is not the log key's name %q", c.Origin, logV.Name())
	}
	return c, nil
}
