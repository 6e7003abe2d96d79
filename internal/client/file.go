package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	commands["put"] = command{"put PATH SIZE SHA256: replace PATH atomically with stdin, which must be SIZE bytes with that digest (parents created, an existing file's mode kept)", cmdPut}
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

func cmdPut(args []string, stderr io.Writer) int {
	if len(args) != 3 {
		fmt.Fprintln(stderr, "usage: toolgate-client put PATH SIZE SHA256 < CONTENT")
		return 2
	}
	size, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || size < 0 {
		fmt.Fprintf(stderr, "put: bad size %q\n", args[1])
		return 2
	}
	sum, err := hex.DecodeString(args[2])
	if err != nil || len(sum) != sha256.Size {
		fmt.Fprintf(stderr, "put: bad sha256 %q\n", args[2])
		return 2
	}
	if err := put(args[0], os.Stdin, size, sum); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// put writes r to a temporary file beside path, syncs it and renames it
// over path, so a reader sees the old file or the new one, never a part.
// The content must be exactly size bytes with SHA-256 sum: input that ends
// early (the gateway went away mid-write) is not taken for the whole file.
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
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, size+1))
	switch {
	case err != nil:
	case n < size:
		err = fmt.Errorf("%s: not written: input ended after %d of %d bytes", path, n, size)
	case n > size:
		err = fmt.Errorf("%s: not written: more input than the %d bytes announced", path, size)
	case !bytes.Equal(h.Sum(nil), sum):
		err = fmt.Errorf("%s: not written: content does not match its sha256", path)
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
