#!/usr/bin/env python3
"""Unit tests for proto/toolsgen.py: the build refuses a broken tools.json.

Usage: test_toolsgen.py TOOLSGEN TOOLS_JSON
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLSGEN, TOOLS_JSON = sys.argv[1], sys.argv[2]


def run(args):
    return subprocess.run([sys.executable, TOOLSGEN] + args,
                          capture_output=True, text=True)


class ToolsgenTest(unittest.TestCase):
    def setUp(self):
        with open(TOOLS_JSON, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, doc=None, text=None):
        path = os.path.join(self.tmp.name, "tools.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text is not None else json.dumps(doc))
        return run(["check", path])

    def refused(self, doc=None, text=None, why=""):
        r = self.check(doc, text)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(why, r.stderr)

    def test_real_file_passes(self):
        self.assertEqual(self.check(self.doc).returncode, 0)

    def test_embed_writes_the_exact_bytes(self):
        out = os.path.join(self.tmp.name, "tools_json.c")
        self.assertEqual(run(["embed", TOOLS_JSON, out]).returncode, 0)
        with open(out) as f:
            c = f.read()
        with open(TOOLS_JSON, "rb") as f:
            raw = f.read()
        self.assertIn(f"mcpvm_tools_json_len = {len(raw)};", c)
        body = c[c.index("{") + 1:c.index("};")]
        data = bytes(int(x, 16) for x in body.replace(",", " ").split())
        self.assertEqual(data, raw)

    def test_doc_keeps_the_hand_written_part(self):
        api = os.path.join(self.tmp.name, "api.md")
        self.assertEqual(run(["doc", TOOLS_JSON, api]).returncode, 0)
        with open(api, encoding="utf-8") as f:
            generated = f.read()
        marker = "<!-- Hand-written from here on; toolsgen.py keeps it. -->"
        tail = marker + "\n\n## Tasks\n\nWritten by hand.\n"
        # An old generated part with the hand-written one after it: doc
        # renews the first and keeps the second, byte for byte.
        with open(api, "w", encoding="utf-8") as f:
            f.write("# stale\n\n" + tail)
        self.assertEqual(run(["doc-check", TOOLS_JSON, api]).returncode, 1)
        self.assertEqual(run(["doc", TOOLS_JSON, api]).returncode, 0)
        with open(api, encoding="utf-8") as f:
            text = f.read()
        self.assertEqual(text, generated + "\n" + tail)
        self.assertEqual(run(["doc-check", TOOLS_JSON, api]).returncode, 0)
        # An edit above the marker is caught; below it is the author's.
        with open(api, "w", encoding="utf-8") as f:
            f.write(text.replace("## Errors", "## Failures", 1))
        r = run(["doc-check", TOOLS_JSON, api])
        self.assertEqual(r.returncode, 1)
        self.assertIn("out of date", r.stderr)
        with open(api, "w", encoding="utf-8") as f:
            f.write(text + "More by hand.\n")
        self.assertEqual(run(["doc-check", TOOLS_JSON, api]).returncode, 0)
        # The marker must be a line of its own to count.
        with open(api, "w", encoding="utf-8") as f:
            f.write(generated + "see " + marker + "\n")
        self.assertEqual(run(["doc", TOOLS_JSON, api]).returncode, 0)
        with open(api, encoding="utf-8") as f:
            self.assertEqual(f.read(), generated)

    def test_missing_tool(self):
        d = copy.deepcopy(self.doc)
        del d["tools"][3]
        self.refused(d, why="tools must be exactly")

    def test_undescribed_field(self):
        d = copy.deepcopy(self.doc)
        del d["tools"][0]["inputSchema"]["properties"]["vcpus"]["description"]
        self.refused(d, why="vm_create.inputSchema.vcpus: no description")

    def test_nested_undescribed_field(self):
        d = copy.deepcopy(self.doc)
        shape = d["tools"][5]["outputSchema"]["oneOf"][1]
        del shape["properties"]["next_cursor"]["properties"]["stdout"][
            "description"]
        self.refused(d, why="next_cursor.stdout: no description")

    def test_open_input(self):
        d = copy.deepcopy(self.doc)
        del d["tools"][1]["inputSchema"]["additionalProperties"]
        self.refused(d, why="vm_list: inputSchema must be a closed object")

    def test_output_not_object(self):
        d = copy.deepcopy(self.doc)
        d["tools"][2]["outputSchema"]["type"] = "array"
        self.refused(d, why="vm_status: outputSchema must have type object")

    def test_unknown_error_code(self):
        d = copy.deepcopy(self.doc)
        d["tools"][4]["errors"].append("teapot")
        self.refused(d, why="unknown error code teapot")

    def test_no_examples(self):
        d = copy.deepcopy(self.doc)
        d["tools"][6]["examples"] = []
        self.refused(d, why="vm_job_cancel: examples")

    def test_duplicate_key(self):
        self.refused(text='{"tools": [], "tools": []}',
                     why="duplicate key 'tools'")

    def test_not_json(self):
        self.refused(text='{"tools": [', why="not valid JSON")

    def test_doc_check_notices_staleness(self):
        path = os.path.join(self.tmp.name, "api.md")
        self.assertEqual(run(["doc", TOOLS_JSON, path]).returncode, 0)
        self.assertEqual(run(["doc-check", TOOLS_JSON, path]).returncode, 0)
        with open(path, "a") as f:
            f.write("hand edit\n")
        r = run(["doc-check", TOOLS_JSON, path])
        self.assertEqual(r.returncode, 1)
        self.assertIn("out of date", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
