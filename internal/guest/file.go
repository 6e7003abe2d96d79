package guest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/toolgate/toolgate/internal/proto"
)

// The gateway's read and write run these inside the sandbox, as the sandbox
// user, through the warm executor: paths and symlinks resolve exactly as the
// sandbox sees them, with its permissions, and no shell is involved.
func init() {
	commands["get"] = command{"get PATH [LIMIT]: a header line {size,mode}, then at most LIMIT bytes of the file", cmdGet}
	commands["put"] = command{"put PATH SIZE SHA256|-: replace PATH atomically with stdin, which must be SIZE bytes with that digest, or with -, SIZE bytes and then the line sha256:HEX of the digest the gateway computed, which commits them (parents created, an existing file's mode kept)", cmdPut}
}

func cmdGet(args []string, stderr io.Writer) int {
	if len(args) < 1 || len(args) > 2 {
		fmt.Fprintln(stderr, "usage: toolgate-client get PATH [LIMIT]")
		return 2
	}
	limit := int64(-1)
	if len(args) == 2 {
		n, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "get: bad limit %q\n", args[1])
			return 2
		}
		limit = n
	}
	if err := get(args[0], limit, os.Stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func get(path string, limit int64, w io.Writer) error {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
	// below, and a regular file reads the same either way.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	switch {
	case st.IsDir():
		return fmt.Errorf("%s: is a directory", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("%s: not a regular file (%s)", path, st.Mode().Type())
	}
	hdr, _ := json.Marshal(proto.FileHeader{Size: st.Size(), Mode: uint32(st.Mode().Perm())})
	if _, err := w.Write(append(hdr, '\n')); err != nil {
		return err
	}
	if out, ok := w.(*os.File); ok {
		if handled, err := spliceTo(out, f, limit); handled {
			return err
		}
	}
	var r io.Reader = f
	if limit >= 0 {
		r = io.LimitReader(f, limit)
	}
	_, err = io.Copy(w, r)
	return err
}

// spliceTo moves up to limit bytes (limit < 0: all) of f to w inside the
// kernel when w is a pipe, as the executor's is: the bytes are not copied
// through this process. handled is false, with nothing moved, when splice
// does not apply (w is a terminal or a file, f's filesystem cannot).
func spliceTo(w, f *os.File, limit int64) (handled bool, err error) {
	in, out := int(f.Fd()), int(w.Fd())
	for moved := int64(0); limit < 0 || moved < limit; {
		n := int64(1 << 20)
		if limit >= 0 {
			n = min(n, limit-moved)
		}
		m, err := syscall.Splice(in, nil, out, nil, int(n), 0)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil && moved == 0 && (errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS)):
			return false, nil
		case err != nil:
			return true, &os.PathError{Op: "splice", Path: f.Name(), Err: err}
		case m == 0:
			return true, nil
		}
		moved += m
	}
	return true, nil
}

func cmdPut(args []string, stderr io.Writer) int { return putCommand(args, "", os.Stdin, stderr) }

// putCommand is `put ARGS` with the content from r: the CLI command and
// the executor's in-process put (servePut) are this one function, so both
// answer the same exit codes and messages. A relative PATH resolves
// against dir, the call's working directory ("": this process's), as the
// command's own would.
func putCommand(args []string, dir string, r io.Reader, stderr io.Writer) int {
	if len(args) != 3 {
		fmt.Fprintln(stderr, "usage: toolgate-client put PATH SIZE SHA256|- < CONTENT")
		return proto.ExitUsage
	}
	size, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || size < 0 {
		fmt.Fprintf(stderr, "put: bad size %q\n", args[1])
		return proto.ExitUsage
	}
	var sum []byte // nil: the digest follows the content (proto.PutDigestAfter)
	if args[2] != proto.PutDigestAfter {
		if sum, err = hex.DecodeString(args[2]); err != nil || len(sum) != sha256.Size {
			fmt.Fprintf(stderr, "put: bad sha256 %q\n", args[2])
			return proto.ExitUsage
		}
	}
	path := args[0]
	if dir != "" && !filepath.IsAbs(path) {
		path = dir + "/" + path // not Join: .. after a symlink resolves as the kernel would
	}
	if err := put(path, r, size, sum); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// put writes r to a temporary file beside path, syncs it and renames it
// over path, so a reader sees the old file or the new one, never a part.
// The content must be exactly size bytes with SHA-256 sum, or, with sum
// nil, size bytes followed by the gateway's digest trailer
// (proto.DigestTrailer), its commit mark: input that ends early (the
// gateway went away mid-write, or refused what it was sent and ended the
// stream) is not taken for the whole file.
func put(path string, r io.Reader, size int64, sum []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("%s: is a directory", path)
		}
		if st.Mode().IsRegular() {
			mode = st.Mode().Perm()
		}
	}
	tmp, err := os.CreateTemp(dir, ".toolgate-tmp-*")
	if err != nil {
		return err
	}
	err = writeContent(tmp, r, size, sum)
	if err != nil {
		err = fmt.Errorf("%s: not written: %w", path, err)
	}
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// putChunk is the most put reads, writes and hashes at once: a piece stays
// in the cache from its read to its write and its hash. Larger pieces, or a
// second goroutine hashing them, cost the sandbox more CPU (measured in a
// sandbox, whose CPU quota the executor shares). syncBehind is how much put
// writes before it asks the kernel to start writing that to disk: the final
// fsync then waits for little more than the last piece (for 256 MiB ~2 ms,
// not ~120 ms).
const (
	putChunk   = 64 << 10
	syncBehind = 2 << 20
)

// writeContent copies size bytes of r to f, then checks that the input ends
// there (sum given) or with one digest trailer (sum nil). Only a digest
// given beforehand is checked against the bytes here. The trailer is the
// gateway's commit mark: the gateway hashed exactly what it sent, on its
// side of a kernel pipe and socket, and that digest is the one it records
// and answers; hashing the bytes again in the sandbox (whose agent owns
// it) would protect against nothing the transport can do, at a quarter of
// a CPU-second per 256 MiB of the sandbox's quota. What put still checks
// is that the content is complete: SIZE bytes, then exactly one
// well-formed trailer, which a gateway that refused the body or went away
// never sends.
func writeContent(f *os.File, r io.Reader, size int64, sum []byte) error {
	var h hash.Hash
	if sum != nil {
		h = sha256.New()
	}
	n, err := copyHashed(f, r, size, h)
	switch {
	case err != nil:
		return err
	case n < size:
		return fmt.Errorf("input ended after %d of %d bytes", n, size)
	}
	if sum == nil {
		rest, err := io.ReadAll(io.LimitReader(r, int64(proto.DigestTrailerLen)+1))
		if err != nil {
			return err
		}
		if _, err := proto.ParseDigestTrailer(rest); err != nil {
			return fmt.Errorf("after the %d bytes announced: %w", size, err)
		}
		return nil
	}
	if m, _ := io.ReadFull(r, make([]byte, 1)); m > 0 {
		return fmt.Errorf("more input than the %d bytes announced", size)
	}
	if !bytes.Equal(h.Sum(nil), sum) {
		return errors.New("content does not match its sha256")
	}
	return nil
}

// copyHashed copies up to size bytes of r to f, and to h unless it is nil,
// and starts the disk writes behind the copy (sync_file_range, where the
// filesystem has it; fsync still decides).
func copyHashed(f *os.File, r io.Reader, size int64, h hash.Hash) (int64, error) {
	var n, synced int64
	fd, syncing := int(f.Fd()), true
	buf := make([]byte, putChunk)
	for n < size {
		m, err := r.Read(buf[:min(int64(len(buf)), size-n)])
		if m > 0 {
			if _, werr := f.Write(buf[:m]); werr != nil {
				return n, werr
			}
			if h != nil {
				h.Write(buf[:m])
			}
			n += int64(m)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if syncing && n-synced >= syncBehind {
			syncing = syscall.SyncFileRange(fd, synced, n-synced, syncFileRangeWrite) == nil
			synced = n
		}
	}
	return n, nil
}

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writing the range out,
// without waiting for it.
const syncFileRangeWrite = 2
