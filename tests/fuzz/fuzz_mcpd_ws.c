/*
 * libFuzzer target: mcpd's WebSocket frame decoder, driven the way the
 * relay drives it (header first, then the whole frame), over a stream of
 * client bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ws.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_rx rx;
	struct ws_event ev;
	uint16_t code;
	uint8_t *buf;
	size_t off = 0;

	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	/* A small limit so the fuzzer reaches it. */
	ws_rx_init(&rx, 4096);
	while (off < size) {
		size_t n = size - off, h = n < WS_MAX_HEADER ? n : WS_MAX_HEADER;
		long r = ws_rx_parse(&rx, buf + off, h, &ev, &code);

		if (r == 0) {
			size_t need = ws_frame_size(buf + off, h);

			if (need == 0 || need > n)
				break;
			r = ws_rx_parse(&rx, buf + off, need, &ev, &code);
			if (r == 0)
				abort();	/* a whole frame is enough */
		}
		if (r < 0) {
			if (!ws_close_code_valid(code))
				abort();
			break;
		}
		if ((size_t)r > n)
			abort();
		if (ev.len > 0 && (ev.payload < buf + off ||
		    ev.payload + ev.len > buf + off + r))
			abort();
		if (ev.kind == WS_EV_CLOSE && ev.close_code != 1005 &&
		    !ws_close_code_valid(ev.close_code))
			abort();
		off += (size_t)r;
	}
	free(buf);
	return 0;
}
