/*
 * RFC 6455 codec for mcpd's guest streams; see ws.h.  Every byte parsed
 * here comes from a network client.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "ws.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* 1 if the comma-separated header value has token (case-insensitive). */
static int
has_token(const char *v, const char *token)
{
	size_t tlen = strlen(token);

	while (v != NULL && *v != '\0') {
		size_t n;

		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		n = strcspn(v, ",");
		while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		if (n == tlen && strncasecmp(v, token, n) == 0)
			return 1;
		v += strcspn(v, ",");
	}
	return 0;
}

int
ws_handshake_check(const char *upgrade, const char *connection,
    const char *key, const char *version, const char **why)
{
	unsigned char raw[32];
	size_t i;
	int n;

	if (!has_token(upgrade, "websocket")) {
		*why = "Upgrade: websocket is required";
		return 400;
	}
	if (!has_token(connection, "upgrade")) {
		*why = "Connection: Upgrade is required";
		return 400;
	}
	if (version == NULL || strcmp(version, "13") != 0) {
		*why = "Sec-WebSocket-Version must be 13";
		return 426;
	}
	if (key == NULL || strlen(key) != 24) {
		*why = "Sec-WebSocket-Key must be 16 bytes in base64";
		return 400;
	}
	for (i = 0; i < 24; i++)
		if (!isalnum((unsigned char)key[i]) && key[i] != '+' &&
		    key[i] != '/' && !(i >= 22 && key[i] == '='))
			goto badkey;
	if (key[22] != '=' || key[23] != '=')
		goto badkey;
	n = EVP_DecodeBlock(raw, (const unsigned char *)key, 24);
	/* 24 characters decode to 18 bytes, two of them padding. */
	if (n != 18)
		goto badkey;
	return 0;
badkey:
	*why = "Sec-WebSocket-Key must be 16 bytes in base64";
	return 400;
}

int
ws_init(void)
{
	char out[WS_ACCEPT_LEN + 1];

	/* OpenSSL reads its configuration on first use: do it now, before
	 * the sandbox forbids opening files. */
	if (OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CONFIG, NULL) != 1)
		return -1;
	return ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
}

int
ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	unsigned char md[SHA_DIGEST_LENGTH];
	char buf[128];
	size_t klen = strlen(key);

	if (klen + sizeof(ws_guid) > sizeof(buf))
		return -1;
	memcpy(buf, key, klen);
	memcpy(buf + klen, ws_guid, sizeof(ws_guid) - 1);
	SHA1((const unsigned char *)buf, klen + sizeof(ws_guid) - 1, md);
	if (EVP_EncodeBlock((unsigned char *)out, md, sizeof(md)) !=
	    WS_ACCEPT_LEN)
		return -1;
	out[WS_ACCEPT_LEN] = '\0';
	return 0;
}

int
ws_close_code_valid(unsigned int code)
{
	if (code >= 3000 && code <= 4999)
		return 1;	/* registered and private use */
	switch (code) {
	case 1000: case 1001: case 1002: case 1003:
	case 1007: case 1008: case 1009: case 1010: case 1011:
	case 1012: case 1013: case 1014:
		return 1;
	}
	return 0;
}

void
ws_rx_init(struct ws_rx *rx, size_t max_msg)
{
	memset(rx, 0, sizeof(*rx));
	rx->max_msg = max_msg;
}

long
ws_rx_parse(struct ws_rx *rx, uint8_t *buf, size_t len, struct ws_event *ev,
    uint16_t *close_code)
{
	uint64_t plen;
	size_t hlen = 2, i;
	uint8_t mask[4];
	int fin, op;

	memset(ev, 0, sizeof(*ev));
	*close_code = WS_CLOSE_PROTOCOL;
	if (len < 2)
		return 0;
	fin = (buf[0] & 0x80) != 0;
	op = buf[0] & 0x0f;
	if (buf[0] & 0x70)
		return -1;		/* no extension was negotiated */
	if (!(buf[1] & 0x80))
		return -1;		/* clients must mask (5.1) */
	plen = buf[1] & 0x7f;
	if (plen == 126) {
		if (len < 4)
			return 0;
		plen = (uint64_t)buf[2] << 8 | buf[3];
		if (plen < 126)
			return -1;	/* not the minimal encoding */
		hlen = 4;
	} else if (plen == 127) {
		if (len < 10)
			return 0;
		if (buf[2] & 0x80)
			return -1;
		for (plen = 0, i = 2; i < 10; i++)
			plen = plen << 8 | buf[i];
		if (plen < 65536)
			return -1;
		hlen = 10;
	}

	switch (op) {
	case WS_OP_CLOSE:
	case WS_OP_PING:
	case WS_OP_PONG:
		if (!fin || plen > 125)
			return -1;	/* 5.5: short and unfragmented */
		break;
	case WS_OP_TEXT:
	case WS_OP_BINARY:
		if (rx->in_msg)
			return -1;	/* a new message inside another */
		break;
	case WS_OP_CONT:
		if (!rx->in_msg)
			return -1;	/* nothing to continue */
		break;
	default:
		return -1;		/* reserved opcode */
	}
	if (op < WS_OP_CLOSE) {
		uint64_t sofar = op == WS_OP_CONT ? rx->msg_len : 0;

		if (plen > rx->max_msg || sofar + plen > rx->max_msg) {
			*close_code = WS_CLOSE_TOO_BIG;
			return -1;	/* refused before it is buffered */
		}
	}
	if (len < hlen + 4 || len - hlen - 4 < plen)
		return 0;
	memcpy(mask, buf + hlen, 4);
	hlen += 4;
	for (i = 0; i < plen; i++)
		buf[hlen + i] ^= mask[i & 3];
	ev->payload = buf + hlen;
	ev->len = (size_t)plen;

	switch (op) {
	case WS_OP_CLOSE:
		ev->kind = WS_EV_CLOSE;
		if (plen == 0) {
			ev->close_code = WS_CLOSE_NO_STATUS;
			break;
		}
		if (plen == 1)
			return -1;
		ev->close_code = (uint16_t)(ev->payload[0] << 8 |
		    ev->payload[1]);
		if (!ws_close_code_valid(ev->close_code))
			return -1;
		ev->reason = (const char *)ev->payload + 2;
		ev->reason_len = plen - 2;
		{
			struct utf8_stream v = { 0 };

			if (utf8_feed(&v, ev->payload + 2, plen - 2) == -1 ||
			    !utf8_complete(&v)) {
				*close_code = WS_CLOSE_BAD_DATA;
				return -1;
			}
		}
		break;
	case WS_OP_PING:
		ev->kind = WS_EV_PING;
		break;
	case WS_OP_PONG:
		ev->kind = WS_EV_PONG;
		break;
	default:
		if (op != WS_OP_CONT) {
			rx->in_msg = 1;
			rx->msg_op = op;
			rx->msg_len = 0;
			memset(&rx->utf8, 0, sizeof(rx->utf8));
		}
		rx->msg_len += plen;
		if (rx->msg_op == WS_OP_TEXT &&
		    (utf8_feed(&rx->utf8, ev->payload, ev->len) == -1 ||
		    (fin && !utf8_complete(&rx->utf8)))) {
			*close_code = WS_CLOSE_BAD_DATA;
			return -1;
		}
		ev->kind = WS_EV_DATA;
		ev->opcode = rx->msg_op;
		ev->fin = fin;
		ev->msg_len = rx->msg_len;
		if (fin)
			rx->in_msg = 0;
		break;
	}
	return (long)(hlen + plen);
}

size_t
ws_frame_size(const uint8_t *buf, size_t len)
{
	uint64_t plen;
	size_t hlen = 2, i;

	if (len < 2)
		return 0;
	plen = buf[1] & 0x7f;
	if (plen == 126) {
		if (len < 4)
			return 0;
		plen = (uint64_t)buf[2] << 8 | buf[3];
		hlen = 4;
	} else if (plen == 127) {
		if (len < 10)
			return 0;
		for (plen = 0, i = 2; i < 10; i++)
			plen = plen << 8 | buf[i];
		hlen = 10;
	}
	if (buf[1] & 0x80)
		hlen += 4;
	if (plen > SIZE_MAX - hlen)
		return SIZE_MAX;
	return hlen + (size_t)plen;
}

size_t
ws_frame_header(uint8_t out[WS_MAX_HEADER], int fin, int opcode,
    uint64_t len)
{
	size_t i;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

size_t
ws_close_payload(uint8_t out[125], uint16_t code, const char *reason)
{
	size_t rlen = reason != NULL ? strlen(reason) : 0;

	out[0] = (uint8_t)(code >> 8);
	out[1] = (uint8_t)code;
	if (rlen > 123) {
		/* Cut at a character boundary so the reason stays UTF-8. */
		rlen = 123;
		while (rlen > 0 && ((uint8_t)reason[rlen] & 0xc0) == 0x80)
			rlen--;
	}
	if (rlen > 0)
		memcpy(out + 2, reason, rlen);
	return 2 + rlen;
}
