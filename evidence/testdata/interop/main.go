// Cross-checks an audita record with independent Go transparency-log and DSSE code:
// checkpoints and keeper co-signatures with golang.org/x/mod/sumdb/note and
// transparency-dev/formats (cosignature/v1, log.ParseCheckpoint), log roots with
// transparency-dev/merkle, envelope signatures with go-securesystemslib dsse.PAE.
package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

func main() {
	dir := os.Args[1]
	keys := map[string][]byte{}
	for _, f := range []string{"keepers.txt", "logs.txt", "principals.txt"} {
		b, _ := os.ReadFile(dir + "/keys/" + f)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, " ", 2)
			pub, _ := base64.StdEncoding.DecodeString(parts[1])
			keys[parts[0]] = pub
		}
	}
	origin := "audita.example/fleet-log"
	logV, err := note.NewEd25519VerifierKey(origin, keys[origin])
	must(err)
	lv, err := note.NewVerifier(logV)
	must(err)
	verifiers := []note.Verifier{lv}
	for _, k := range []string{"operator.example/keeper", "vendor.example/keeper", "insurer.example/keeper"} {
		cv, err := fnote.NewVerifierForCosignatureV1(cosigVkey(k, keys[k]))
		must(err)
		verifiers = append(verifiers, cv)
	}
	// Envelope signatures: Ed25519 over the DSSE PAE of go-securesystemslib.
	segs, _ := os.ReadDir(dir + "/segments")
	checked := 0
	for _, f := range segs {
		if !strings.HasPrefix(f.Name(), "envelopes-") {
			continue
		}
		b, _ := os.ReadFile(dir + "/segments/" + f.Name())
		for pos := 8; pos+4 <= len(b); {
			n := int(binary.BigEndian.Uint32(b[pos:]))
			env := b[pos+4 : pos+4+n]
			pos += 4 + n
			body, sig := env[:len(env)-64], env[len(env)-64:]
			authorLen := int(body[1]) // single-byte varint for short names
			author := string(body[2 : 2+authorLen])
			pae := dsse.PAE("application/vnd.audita.envelope.v1", body)
			if !ed25519.Verify(ed25519.PublicKey(keys[author]), pae, sig) {
				panic("envelope signature does not verify with Go DSSE PAE")
			}
			checked++
		}
	}
	fmt.Printf("%d envelope signatures verify with crypto/ed25519 over go-securesystemslib dsse.PAE\n", checked)

	// Recompute the log root from the sealed leaves with transparency-dev/merkle.
	rf := compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	cr := rf.NewEmptyRange(0)
	roots := map[uint64][]byte{}
	epochs, _ := os.ReadDir(dir + "/epochs")
	for _, f := range epochs {
		b, _ := os.ReadFile(dir + "/epochs/" + f.Name())
		frames := [][]byte{}
		for pos := 8; pos+4 <= len(b); {
			n := int(binary.BigEndian.Uint32(b[pos:]))
			frames = append(frames, b[pos+4:pos+4+n])
			pos += 4 + n
		}
		for _, leaf := range frames[1:] {
			must(cr.Append(rfc6962.DefaultHasher.HashLeaf(leaf), nil))
		}
		root, err := cr.GetRootHash(nil)
		must(err)
		roots[cr.End()] = root
	}
	files, _ := os.ReadDir(dir + "/checkpoints")
	for _, f := range files {
		b, _ := os.ReadFile(dir + "/checkpoints/" + f.Name())
		n, err := note.Open(b, note.VerifierList(verifiers...))
		must(err)
		cp, _, _, err := log.ParseCheckpoint(b, origin, lv, verifiers[1:]...)
		must(err)
		if !bytes.Equal(roots[cp.Size], cp.Hash) {
			panic(fmt.Sprintf("%s: root differs from transparency-dev/merkle", f.Name()))
		}
		fmt.Printf("%s: size %d, root matches transparency-dev/merkle, %d verified signatures (log + cosigners):", f.Name(), cp.Size, len(n.Sigs))
		for _, s := range n.Sigs {
			fmt.Printf(" %s", s.Name)
		}
		fmt.Println()
	}
}

func cosigVkey(name string, pub []byte) string {
	// vkey: name+hex(keyid)+base64(0x04||pub)
	v, err := note.NewEd25519VerifierKey(name, pub)
	must(err)
	c, err := fnote.VKeyToCosignatureV1(v)
	must(err)
	return c
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
