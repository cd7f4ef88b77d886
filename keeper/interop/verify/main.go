// Command verify checks Audita checkpoints, keeper cosignatures and RFC 6962
// consistency proofs with independent implementations only:
// golang.org/x/mod/sumdb/note (signed notes, the log's Ed25519 signature),
// github.com/transparency-dev/formats/note (cosignature/v1, type 0x04),
// filippo.io/torchwood (checkpoint body parsing) and golang.org/x/mod/sumdb/tlog
// (consistency proofs).
//
//	verify -log VKEY [-witness VKEY]... -checkpoint FILE
//	       [-old FILE -proof FILE]
//	verify -log VKEY -evidence FILE
//
// Every -witness key must have a valid cosignature on the checkpoint (and on
// -old, when given). -proof holds one base64 hash a line: the consistency proof
// from -old to -checkpoint. -evidence checks a keeper's evidence record
// (audita.keeper-evidence/v1 JSON, keeper/src/evidence.rs): both notes carry a
// valid signature of the log; "equivocation": same origin and size, different
// roots; "inconsistent": the refused checkpoint is larger and the submitted proof
// does not verify from the co-signed one. Exit 0 and "ok" when everything
// verifies; exit 1 with the reason otherwise.
package main

import (
	"encoding/base64"
	"encoding/json"
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
	evidenceFile := flag.String("evidence", "", "a keeper's evidence record (JSON)")
	flag.Parse()
	var err error
	if *evidenceFile != "" {
		err = checkEvidence(*logKey, *evidenceFile)
	} else {
		err = run(*logKey, witnesses, *cpFile, *oldFile, *proofFile)
	}
	if err != nil {
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
	proof, err := parseProof(strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n"))
	if err != nil {
		return err
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

func parseProof(lines []string) (tlog.TreeProof, error) {
	var proof tlog.TreeProof
	for _, line := range lines {
		if line == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(line)
		if err != nil || len(b) != tlog.HashSize {
			return nil, fmt.Errorf("proof line %q is not a base64 hash", line)
		}
		var h tlog.Hash
		copy(h[:], b)
		proof = append(proof, h)
	}
	return proof, nil
}

type evidenceRecord struct {
	Format   string   `json:"format"`
	Kind     string   `json:"kind"`
	Origin   string   `json:"origin"`
	Cosigned string   `json:"cosigned"`
	Refused  string   `json:"refused"`
	Proof    []string `json:"proof"`
}

// logSigned verifies the log's signature on a note and parses its checkpoint.
func logSigned(text string, logV note.Verifier) (torchwood.Checkpoint, error) {
	n, err := note.Open([]byte(text), note.VerifierList(logV))
	if err != nil {
		return torchwood.Checkpoint{}, err
	}
	c, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil {
		return torchwood.Checkpoint{}, err
	}
	if c.Origin != logV.Name() {
		return torchwood.Checkpoint{}, fmt.Errorf("origin %q is not the log key's name", c.Origin)
	}
	return c, nil
}

func checkEvidence(logKey, file string) error {
	logV, err := note.NewVerifier(logKey)
	if err != nil {
		return fmt.Errorf("log key: %w", err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var r evidenceRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.Format != "audita.keeper-evidence/v1" {
		return fmt.Errorf("format %q", r.Format)
	}
	a, err := logSigned(r.Cosigned, logV)
	if err != nil {
		return fmt.Errorf("cosigned note: %w", err)
	}
	b, err := logSigned(r.Refused, logV)
	if err != nil {
		return fmt.Errorf("refused note: %w", err)
	}
	switch r.Kind {
	case "equivocation":
		if a.N != b.N || a.Hash == b.Hash {
			return errors.New("not two checkpoints of one size with different roots")
		}
	case "inconsistent":
		if b.N <= a.N {
			return errors.New("refused checkpoint is not larger")
		}
		proof, err := parseProof(r.Proof)
		if err != nil {
			return err
		}
		if tlog.CheckTree(proof, b.N, b.Hash, a.N, a.Hash) == nil {
			return errors.New("the submitted proof is a valid consistency proof")
		}
	default:
		return fmt.Errorf("kind %q", r.Kind)
	}
	return nil
}
