package rootfs

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"time"
)

// AgentUID is the sandbox user every profile provides (proto.DefaultUser).
const AgentUID = 1000

// tarWriter writes a root filesystem; the first error sticks and ends all
// further writes, so a profile checks once, at close.
type tarWriter struct {
	tw  *tar.Writer
	now time.Time
	err error
}

func newTarWriter(w io.Writer) *tarWriter {
	return &tarWriter{tw: tar.NewWriter(w), now: time.Now()}
}

func (t *tarWriter) header(h *tar.Header) {
	if h.ModTime.IsZero() {
		h.ModTime = t.now
	}
	h.Format = tar.FormatPAX
	if t.err == nil {
		t.err = t.tw.WriteHeader(h)
	}
}

func (t *tarWriter) dir(name string, mode int64, uid int) {
	t.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid})
}

func (t *tarWriter) file(name string, mode int64, body []byte) {
	t.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))})
	if t.err == nil && len(body) > 0 {
		_, t.err = t.tw.Write(body)
	}
}

func (t *tarWriter) symlink(name, target string) {
	t.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777})
}

// hostFile streams the host file at path into the tar as name.
func (t *tarWriter) hostFile(name string, mode int64, path string) {
	if t.err != nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.err = err
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.err = err
		return
	}
	t.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: fi.Size()})
	if t.err == nil {
		var n int64
		n, t.err = io.Copy(t.tw, f)
		if t.err == nil && n != fi.Size() {
			t.err = fmt.Errorf("%s changed size while being copied", path)
		}
	}
}

// copyEntry copies one entry of another tar, body and all.
func (t *tarWriter) copyEntry(h *tar.Header, body io.Reader) {
	t.header(h)
	if t.err == nil && h.Typeflag == tar.TypeReg && h.Size > 0 {
		_, t.err = io.CopyN(t.tw, body, h.Size)
	}
}

func (t *tarWriter) close() error {
	if t.err == nil {
		t.err = t.tw.Close()
	}
	if t.err != nil {
		return fmt.Errorf("writing the root filesystem: %w", t.err)
	}
	return nil
}
