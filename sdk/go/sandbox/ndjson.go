package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ndjsonReader reads a streaming NDJSON response (one JSON value a line), each line at
// most max bytes. It is the reader of every event stream: process output, background
// output, code executions and directory watches. Its Read hands on what is buffered
// (to drain the rest of a body).
type ndjsonReader struct {
	*bufio.Reader
	max int
	// skip: the last line ended in ErrTooLarge before its newline was read; the next
	// line call drops the rest of it first, so the reader goes on at a line boundary.
	skip bool
}

func newNDJSONReader(r io.Reader, max int) *ndjsonReader {
	return &ndjsonReader{Reader: bufio.NewReaderSize(r, 64<<10), max: max}
}

// line returns the next line without its newline ("\n" or "\r\n"). A line longer than
// max is ErrTooLarge, returned as soon as the limit is passed (at most max plus 64 KiB
// of it is read); the next call skips the rest of that line (read and dropped, without
// holding it) and returns the line after it, so the reader stays in step with the
// lines. A stream that ends cleanly (io.EOF) after a last line without a newline
// returns that line, then io.EOF. A read that fails inside a line (a cut connection, a
// chunked body ended early: io.ErrUnexpectedEOF) returns that error, not the partial
// line.
func (n *ndjsonReader) line() ([]byte, error) {
	if n.skip {
		if err := n.skipLine(); err != nil {
			return nil, err
		}
	}
	var line []byte
	for {
		chunk, err := n.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > n.max+2 { // room for the line end
			// Inside the line (its newline not read yet): the next call drops the rest.
			n.skip = errors.Is(err, bufio.ErrBufferFull)
			return nil, fmt.Errorf("%w: event line over %d bytes", ErrTooLarge, n.max)
		}
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			if len(line) > n.max {
				return nil, fmt.Errorf("%w: event line over %d bytes", ErrTooLarge, n.max)
			}
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0: // a clean end after a last line
			return line, nil
		default:
			return nil, err
		}
	}
}

// skipLine reads and drops the rest of the current line, up to and including its
// newline. A stream that ends there (io.EOF, a cut) returns that error.
func (n *ndjsonReader) skipLine() error {
	for {
		_, err := n.ReadSlice('\n')
		switch {
		case err == nil:
			n.skip = false
			return nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return err
		}
	}
}

// decode reads the next line that is not blank (blank lines are heartbeats) into v.
func (n *ndjsonReader) decode(v any) error {
	for {
		line, err := n.line()
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := json.Unmarshal(line, v); err != nil {
			return fmt.Errorf("bad event: %w", err)
		}
		return nil
	}
}
