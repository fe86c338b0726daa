package tds

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// BenchmarkRows100k reads a 100,000-row result set (int, nvarchar(40))
// through go-mssqldb. Bytes are the ROW tokens on the wire.
func BenchmarkRows100k(b *testing.B) {
	const n = 100_000
	_, _, addr := startServer(b, Options{})
	db := openDB(b, addr, "packet size", "32767")
	wire := 0
	for i := 0; i < n; i++ {
		wire += 1 + 5 + 2 + 2*len("row number "+strconv.Itoa(i))
	}
	b.SetBytes(int64(wire))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := db.Query("rows " + strconv.Itoa(n))
		if err != nil {
			b.Fatal(err)
		}
		count := 0
		var id int
		var name string
		for rows.Next() {
			if err := rows.Scan(&id, &name); err != nil {
				b.Fatal(err)
			}
			count++
		}
		if err := rows.Err(); err != nil || count != n {
			b.Fatalf("got %d rows: %v", count, err)
		}
		rows.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkNVarCharMax64MiB reads one nvarchar(max) value of 64 MiB on the
// wire (32 Mi characters) through go-mssqldb.
func BenchmarkNVarCharMax64MiB(b *testing.B) {
	const chars = 32 << 20
	for _, size := range []int{4096, 32767} {
		b.Run(fmt.Sprintf("packet=%d", size), func(b *testing.B) {
			_, _, addr := startServer(b, Options{})
			db := openDB(b, addr, "packet size", strconv.Itoa(size))
			b.SetBytes(2 * chars)
			for i := 0; i < b.N; i++ {
				var s string
				if err := db.QueryRow("blob " + strconv.Itoa(chars)).Scan(&s); err != nil {
					b.Fatal(err)
				}
				if len(s) != chars {
					b.Fatalf("got %d characters", len(s))
				}
			}
		})
	}
}

// BenchmarkServerOnly64MiB measures the server alone: the same 64 MiB
// nvarchar(max) read by a raw socket client that does not decode it.
func BenchmarkServerOnly64MiB(b *testing.B) {
	const chars = 32 << 20
	_, _, addr := startServer(b, Options{})
	c := rawLogin(b, addr, 32767)
	_ = c.SetDeadline(time.Time{})
	batch := packet(packetSQLBatch, statusEOM, append([]byte{4, 0, 0, 0}, appendUCS2(nil, "blob "+strconv.Itoa(chars))...))
	b.SetBytes(2 * chars)
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(batch); err != nil {
			b.Fatal(err)
		}
		if n := drainReply(b, c); n < 2*chars {
			b.Fatalf("reply of %d bytes", n)
		}
	}
}

// BenchmarkLoopbackReference is the reference for the two above: the same
// 64 MiB copied over a bare loopback TCP connection.
func BenchmarkLoopbackReference(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const size = 64 << 20
	go func() {
		buf := make([]byte, 32767)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			for sent := 0; sent < size; sent += len(buf) {
				if _, err := c.Write(buf[:min(len(buf), size-sent)]); err != nil {
					break
				}
			}
			c.Close()
		}
	}()
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, c)
		c.Close()
		if err != nil || n != size {
			b.Fatalf("copied %d bytes: %v", n, err)
		}
	}
}

// drainReply reads one server message and returns its payload length.
func drainReply(b *testing.B, c net.Conn) int {
	buf := make([]byte, maxPacketSize)
	total := 0
	for {
		if _, err := io.ReadFull(c, buf[:headerSize]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint16(buf[2:]))
		status := buf[1]
		if _, err := io.ReadFull(c, buf[headerSize:n]); err != nil {
			b.Fatal(err)
		}
		total += n - headerSize
		if status == statusEOM {
			return total
		}
	}
}
