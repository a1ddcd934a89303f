/*
 * Retry receipts for vm_create and vm_exec: the digest that says whether
 * a retried request_id carries the same arguments.  The receipts
 * themselves live in the store.
 */
#ifndef MCPVM_VMMD_RECEIPTS_H
#define MCPVM_VMMD_RECEIPTS_H

#include <json-c/json.h>

#define RECEIPT_DIGEST_HEX	64

/*
 * SHA-256 over the arguments in canonical form (object keys sorted, no
 * whitespace), leaving out request_id itself.  0, or -1 when the
 * arguments cannot be serialised.
 */
int	receipt_digest(struct json_object *args,
	    char out[RECEIPT_DIGEST_HEX + 1]);

#endif
