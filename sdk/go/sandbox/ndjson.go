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
}

func newNDJSONReader(r io.Reader, max int) *ndjsonReader {
	return &ndjsonReader{Reader: bufio.NewReaderSize(r, 64<<10), max: max}
}

// line returns the next line without its newline ("\n" or "\r\n"). A line longer than
// max is ErrTooLarge. A stream that ends cleanly (io.EOF) after a last line without a
// newline returns that line, then io.EOF. A read that fails inside a line (a cut
// connection, a chunked body ended early: io.ErrUnexpectedEOF) returns that error, not
// the partial line.
func (n *ndjsonReader) line() ([]byte, error) {
	var line []byte
	for {
		chunk, err := n.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > n.max+2 { // room for the line end
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
