// Command interop checks an Audita record's log with an independent
// implementation: golang.org/x/mod/sumdb/note for the signed checkpoint and its
// cosignatures, golang.org/x/mod/sumdb/tlog for the tiles, inclusion and
// consistency proofs. It shares no code with Audita and knows only the public
// formats (c2sp.org/tlog-tiles, tlog-checkpoint, tlog-cosignature, tlog-proof,
// tlog-witness).
//
// Usage:
//
//	interop -url http://127.0.0.1:PORT -log-vkey keys/log.vkey \
//	    [-keepers-vkey keys/keepers.vkey] [-consistency FILE]... [-inclusion FILE]...
//
// It fetches /checkpoint and verifies the log's signature (and every keeper's
// cosignature/v1 when -keepers-vkey is given), recomputes the tree root from the
// hash tiles (tlog.TileHashReader checks every tile it reads against the signed
// root), checks that every entry of every entry bundle hashes to its level-0 tile
// hash and has a valid inclusion proof (tlog.ProveRecord / tlog.CheckRecord),
// then checks each consistency proof file (the output of `audita proof
// consistency`, a tlog-witness add-checkpoint body) with tlog.CheckTree against
// the old root recomputed from the tiles, and each inclusion proof file
// (`audita proof inclusion`, a tlog-proof) with tlog.CheckRecord.
//
// Exit status 0 when everything verifies, 1 with a one-line reason otherwise.
package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	url := flag.String("url", "", "log prefix URL (audita serve-log)")
	logVkey := flag.String("log-vkey", "", "file with the log's verifier key")
	keepersVkey := flag.String("keepers-vkey", "", "file with the keepers' cosignature/v1 verifier keys (all must cosign)")
	var consistency, inclusion multiFlag
	flag.Var(&consistency, "consistency", "consistency proof file (audita proof consistency)")
	flag.Var(&inclusion, "inclusion", "inclusion proof file (audita proof inclusion)")
	flag.Parse()
	summary, err := run(*url, *logVkey, *keepersVkey, consistency, inclusion)
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop: FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("interop: OK: " + summary)
}

// checkpoint is a parsed c2sp.org/tlog-checkpoint body.
type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

func parseCheckpoint(text string) (checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 {
		return checkpoint{}, errors.New("checkpoint body has fewer than three lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return checkpoint{}, fmt.Errorf("checkpoint size %q is not a canonical decimal", lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return checkpoint{}, fmt.Errorf("checkpoint root %q is not a base64 SHA-256 hash", lines[2])
	}
	var root tlog.Hash
	copy(root[:], raw)
	return checkpoint{origin: lines[0], size: size, root: root}, nil
}

// cosigVerifier verifies c2sp.org/tlog-cosignature cosignature/v1 signatures
// through the standard note verification path.
type cosigVerifier struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.hash }
func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig[:8])
	signed := fmt.Sprintf("cosignature/v1\ntime %d\n", ts) + string(msg)
	return ed25519.Verify(v.key, []byte(signed), sig[8:])
}

func newCosigVerifier(vkey string) (*cosigVerifier, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("keeper key %q is not name+hash+key", vkey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 0x04 {
		return nil, fmt.Errorf("keeper key %q is not a cosignature/v1 (0x04) Ed25519 key", vkey)
	}
	id, err := hex.DecodeString(parts[1])
	if err != nil || len(id) != 4 {
		return nil, fmt.Errorf("keeper key %q: bad key hash", vkey)
	}
	h := sha256.Sum256(append([]byte(parts[0]+"\n"), raw...))
	if !bytes.Equal(h[:4], id) {
		return nil, fmt.Errorf("keeper key %q: key hash does not match", vkey)
	}
	return &cosigVerifier{name: parts[0], hash: binary.BigEndian.Uint32(id), key: raw[1:]}, nil
}

func readLines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

type verifiers struct {
	log     note.Verifier
	keepers []*cosigVerifier
}

// open verifies a checkpoint note: the log's signature and, for each keeper, its
// cosignature. Returns the parsed checkpoint.
func (v *verifiers) open(msg []byte) (checkpoint, error) {
	list := []note.Verifier{v.log}
	for _, k := range v.keepers {
		list = append(list, k)
	}
	n, err := note.Open(msg, note.VerifierList(list...))
	if err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint note: %v", err)
	}
	signed := map[string]bool{}
	for _, s := range n.Sigs {
		signed[s.Name] = true
	}
	if !signed[v.log.Name()] {
		return checkpoint{}, errors.New("checkpoint is not signed by the log")
	}
	for _, k := range v.keepers {
		if !signed[k.name] {
			return checkpoint{}, fmt.Errorf("checkpoint lacks a valid cosignature of keeper %s", k.name)
		}
	}
	cp, err := parseCheckpoint(n.Text)
	if err != nil {
		return checkpoint{}, err
	}
	if cp.origin != v.log.Name() {
		return checkpoint{}, fmt.Errorf("checkpoint origin %q is not the log's key name %q", cp.origin, v.log.Name())
	}
	return cp, nil
}

// httpTiles is a tlog.TileReader over a C2SP tlog-tiles prefix.
type httpTiles struct {
	base   string
	client *http.Client
	cache  map[string][]byte
}

func (r *httpTiles) Height() int { return 8 }

// c2spPath maps x/mod's sumdb tile path (tile/8/L/N, tile/8/data/N) to the
// C2SP one (tile/L/N, tile/entries/N), and checks it parses back to the tile.
func c2spPath(t tlog.Tile) (string, error) {
	p := t.Path()
	back, err := tlog.ParseTilePath(p)
	if err != nil || back != t {
		return "", fmt.Errorf("tile %+v: path %q does not parse back", t, p)
	}
	rest := strings.TrimPrefix(p, "tile/8/")
	if strings.HasPrefix(rest, "data/") {
		rest = "entries/" + strings.TrimPrefix(rest, "data/")
	}
	return "tile/" + rest, nil
}

func (r *httpTiles) fetch(path string, wantType string) ([]byte, *http.Response, error) {
	if b, ok := r.cache[path]; ok {
		return b, nil, nil
	}
	resp, err := r.client.Get(r.base + "/" + path)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256*65538))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET /%s: %s", path, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != wantType {
		return nil, nil, fmt.Errorf("GET /%s: Content-Type %q, want %q", path, ct, wantType)
	}
	r.cache[path] = body
	return body, resp, nil
}

func (r *httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		p, err := c2spPath(t)
		if err != nil {
			return nil, err
		}
		b, resp, err := r.fetch(p, "application/octet-stream")
		if err != nil {
			return nil, err
		}
		if resp != nil && !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
			return nil, fmt.Errorf("GET /%s: tiles must be served immutable", p)
		}
		out[i] = b
	}
	return out, nil
}

func (r *httpTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// parseBundle splits a tlog-tiles entry bundle (big-endian uint16 length-prefixed entries).
func parseBundle(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 2 {
			return nil, errors.New("entry bundle: torn length prefix")
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, errors.New("entry bundle: entry runs past the end")
		}
		out = append(out, b[2:2+n])
		b = b[2+n:]
	}
	return out, nil
}

func parseHashLines(lines []string) ([]tlog.Hash, error) {
	var out []tlog.Hash
	for _, l := range lines {
		raw, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(raw) != tlog.HashSize {
			return nil, fmt.Errorf("proof line %q is not a base64 hash", l)
		}
		var h tlog.Hash
		copy(h[:], raw)
		out = append(out, h)
	}
	return out, nil
}

// splitProof splits "header lines + hash lines, empty line, checkpoint note".
func splitProof(data []byte) (head []string, note []byte, err error) {
	i := bytes.Index(data, []byte("\n\n"))
	if i < 0 {
		return nil, nil, errors.New("proof has no empty line before its checkpoint")
	}
	sc := bufio.NewScanner(bytes.NewReader(data[:i+1]))
	for sc.Scan() {
		head = append(head, sc.Text())
	}
	return head, data[i+2:], nil
}

func run(url, logVkeyPath, keepersPath string, consistency, inclusion []string) (string, error) {
	if url == "" || logVkeyPath == "" {
		return "", errors.New("-url and -log-vkey are required")
	}
	lines, err := readLines(logVkeyPath)
	if err != nil || len(lines) != 1 {
		return "", fmt.Errorf("%s: want exactly one verifier key (%v)", logVkeyPath, err)
	}
	logV, err := note.NewVerifier(lines[0])
	if err != nil {
		return "", fmt.Errorf("log verifier key: %v", err)
	}
	vs := &verifiers{log: logV}
	if keepersPath != "" {
		lines, err := readLines(keepersPath)
		if err != nil {
			return "", err
		}
		for _, l := range lines {
			k, err := newCosigVerifier(l)
			if err != nil {
				return "", err
			}
			vs.keepers = append(vs.keepers, k)
		}
	}
	tiles := &httpTiles{base: strings.TrimSuffix(url, "/"), client: &http.Client{Timeout: 10 * time.Second}, cache: map[string][]byte{}}
	cpBytes, _, err := tiles.fetch("checkpoint", "text/plain; charset=utf-8")
	if err != nil {
		return "", err
	}
	delete(tiles.cache, "checkpoint")
	cp, err := vs.open(cpBytes)
	if err != nil {
		return "", err
	}
	tree := tlog.Tree{N: cp.size, Hash: cp.root}
	hr := tlog.TileHashReader(tree, tiles)
	th, err := tlog.TreeHash(cp.size, hr)
	if err != nil {
		return "", fmt.Errorf("tree hash from tiles: %v", err)
	}
	if th != cp.root {
		return "", errors.New("the tiles do not reproduce the checkpoint's root")
	}
	// Every entry: hashes to its level-0 tile hash, and is included in the tree.
	for n := int64(0); n*256 < cp.size; n++ {
		w := cp.size - n*256
		if w > 256 {
			w = 256
		}
		bundleTile := tlog.Tile{H: 8, L: -1, N: n, W: int(w)}
		p, err := c2spPath(bundleTile)
		if err != nil {
			return "", err
		}
		data, _, err := tiles.fetch(p, "application/octet-stream")
		if err != nil {
			return "", err
		}
		entries, err := parseBundle(data)
		if err != nil {
			return "", fmt.Errorf("/%s: %v", p, err)
		}
		if int64(len(entries)) != w {
			return "", fmt.Errorf("/%s: %d entries, want %d", p, len(entries), w)
		}
		level0 := tlog.Tile{H: 8, L: 0, N: n, W: int(w)}
		tileData, err := tlog.ReadTileData(level0, hr)
		if err != nil {
			return "", fmt.Errorf("level-0 tile %d: %v", n, err)
		}
		for j, e := range entries {
			idx := n*256 + int64(j)
			rh := tlog.RecordHash(e)
			fromTile, err := tlog.HashFromTile(level0, tileData, tlog.StoredHashIndex(0, idx))
			if err != nil || fromTile != rh {
				return "", fmt.Errorf("entry %d does not hash to its level-0 tile hash", idx)
			}
			proof, err := tlog.ProveRecord(cp.size, idx, hr)
			if err != nil {
				return "", fmt.Errorf("inclusion proof of entry %d: %v", idx, err)
			}
			if err := tlog.CheckRecord(proof, cp.size, cp.root, idx, rh); err != nil {
				return "", fmt.Errorf("entry %d: %v", idx, err)
			}
		}
	}
	summary := fmt.Sprintf("checkpoint %s size %d verified (log signature, %d keeper cosignatures); tiles reproduce the root; %d entries included",
		cp.origin, cp.size, len(vs.keepers), cp.size)
	for _, path := range consistency {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		head, noteBytes, err := splitProof(data)
		if err != nil || len(head) == 0 || !strings.HasPrefix(head[0], "old ") {
			return "", fmt.Errorf("%s: not a tlog-witness add-checkpoint body", path)
		}
		old, err := strconv.ParseInt(strings.TrimPrefix(head[0], "old "), 10, 64)
		if err != nil || old < 0 {
			return "", fmt.Errorf("%s: bad old size line %q", path, head[0])
		}
		proof, err := parseHashLines(head[1:])
		if err != nil {
			return "", fmt.Errorf("%s: %v", path, err)
		}
		newCp, err := vs.open(noteBytes)
		if err != nil {
			return "", fmt.Errorf("%s: %v", path, err)
		}
		if newCp.size > cp.size || old > newCp.size {
			return "", fmt.Errorf("%s: sizes %d → %d outside the served tree of %d", path, old, newCp.size, cp.size)
		}
		// Both roots recomputed from the tiles; the new one must match the signed note.
		oldRoot, err := tlog.TreeHash(old, hr)
		if err != nil {
			return "", err
		}
		newRoot, err := tlog.TreeHash(newCp.size, hr)
		if err != nil {
			return "", err
		}
		if newRoot != newCp.root {
			return "", fmt.Errorf("%s: the tiles do not reproduce the root of size %d", path, newCp.size)
		}
		if old > 0 && old < newCp.size {
			if err := tlog.CheckTree(tlog.TreeProof(proof), newCp.size, newCp.root, old, oldRoot); err != nil {
				return "", fmt.Errorf("%s: consistency %d → %d: %v", path, old, newCp.size, err)
			}
			ours, err := tlog.ProveTree(newCp.size, old, hr)
			if err != nil {
				return "", err
			}
			if len(ours) != len(proof) {
				return "", fmt.Errorf("%s: proof has %d hashes, tlog's has %d", path, len(proof), len(ours))
			}
		} else if len(proof) != 0 {
			return "", fmt.Errorf("%s: a proof from size %d to %d must be empty", path, old, newCp.size)
		}
		summary += fmt.Sprintf("; consistency %d → %d verified", old, newCp.size)
	}
	for _, path := range inclusion {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		head, noteBytes, err := splitProof(data)
		if err != nil || len(head) < 3 || head[0] != "c2sp.org/tlog-proof@v1" ||
			!strings.HasPrefix(head[1], "extra ") || !strings.HasPrefix(head[2], "index ") {
			return "", fmt.Errorf("%s: not a c2sp.org/tlog-proof@v1 with extra and index lines", path)
		}
		leaf, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(head[1], "extra "))
		if err != nil {
			return "", fmt.Errorf("%s: extra is not base64", path)
		}
		idx, err := strconv.ParseInt(strings.TrimPrefix(head[2], "index "), 10, 64)
		if err != nil || idx < 0 {
			return "", fmt.Errorf("%s: bad index line", path)
		}
		proof, err := parseHashLines(head[3:])
		if err != nil {
			return "", fmt.Errorf("%s: %v", path, err)
		}
		pc, err := vs.open(noteBytes)
		if err != nil {
			return "", fmt.Errorf("%s: %v", path, err)
		}
		if err := tlog.CheckRecord(tlog.RecordProof(proof), pc.size, pc.root, idx, tlog.RecordHash(leaf)); err != nil {
			return "", fmt.Errorf("%s: inclusion of entry %d in size %d: %v", path, idx, pc.size, err)
		}
		summary += fmt.Sprintf("; inclusion of entry %d in size %d verified", idx, pc.size)
	}
	return summary, nil
}
