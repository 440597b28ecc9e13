// Package keyslot computes Redis Cluster hash slots as CLUSTER KEYSLOT does,
// without asking a server.
package keyslot

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Of is the slot of key: CRC16 of its hash tag — the bytes between the
// first '{' and the next '}', when there is at least one — or of the whole
// key, mod Count.
func Of(key string) int {
	return int(CRC16(0, tagOf(key)) % Count)
}

func tagOf(key string) string {
	for i := range len(key) {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key // "{}" is no tag: the whole key counts
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

// CRC16 continues crc over s: CRC-16/XMODEM, Redis Cluster's key hash.
func CRC16(crc uint16, s string) uint16 {
	for i := range len(s) {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
