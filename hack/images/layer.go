package images

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// modTime is every file's modification time in the layers: the Unix epoch, so that a layer's
// digest depends on its files' contents alone and the base layer is the same blob in every
// release.
var modTime = time.Unix(0, 0).UTC()

// baseFiles says what the base layer holds, for the images' history.
const baseFiles = "/etc/passwd, /etc/group, /home/nonroot, /tmp"

// passwd and group are distroless' (static-debian12:nonroot) less the users nothing runs as.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
)

// entry is one file or directory of a layer.
type entry struct {
	// name is the path without the leading slash; a directory's ends in a slash.
	name string
	// mode holds the permission bits, and the sticky bit (01000) for /tmp.
	mode     int64
	uid, gid int
	// data is a regular file's contents, or src names the file that holds them.
	data []byte
	src  string
}

func (e entry) dir() bool { return strings.HasSuffix(e.name, "/") }

// baseEntries are the base layer's files, in the order they are written (parents first).
func baseEntries() []entry {
	return []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: NonRootUID, gid: NonRootGID},
		{name: "tmp/", mode: 0o1777},
	}
}

// binaryEntries are the binary layer's: the directories down to target, then target, owned
// by root and executable by all, with the bytes of src.
func binaryEntries(target, src string) []entry {
	target = strings.TrimPrefix(target, "/")
	var es []entry
	for d := path.Dir(target); d != "."; d = path.Dir(d) {
		es = append([]entry{{name: d + "/", mode: 0o755}}, es...)
	}
	return append(es, entry{name: target, mode: 0o755, src: src})
}

// baseLayer is the layer every image starts from.
func baseLayer() (v1.Layer, error) { return layer(baseEntries()) }

// binaryLayer holds the binary at src as target.
func binaryLayer(target, src string) (v1.Layer, error) {
	if _, err := os.Stat(src); err != nil {
		return nil, err
	}
	return layer(binaryEntries(target, src))
}

// layer is a gzip-compressed OCI layer of entries. Its tar is streamed from the entries each
// time it is read; the compressed bytes are computed once and kept.
func layer(entries []entry) (v1.Layer, error) {
	opener := func() (io.ReadCloser, error) {
		r, w := io.Pipe()
		go func() { w.CloseWithError(writeTar(w, entries)) }()
		return r, nil
	}
	return tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// writeTar writes entries as a tar with fixed times and numeric owners only, so that the
// same entries give the same bytes.
func writeTar(w io.Writer, entries []entry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := writeEntry(tw, e); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, e entry) error {
	hdr := &tar.Header{
		Name:    e.name,
		Mode:    e.mode,
		Uid:     e.uid,
		Gid:     e.gid,
		ModTime: modTime,
		Format:  tar.FormatPAX,
	}
	if e.dir() {
		hdr.Typeflag = tar.TypeDir
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag = tar.TypeReg
	if e.src == "" {
		hdr.Size = int64(len(e.data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	hdr.Size = fi.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}
