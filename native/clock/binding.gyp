{
  "targets": [
    {
      "target_name": "clock",
      "sources": ["clock.cc"],
      "cflags_cc": ["-O2", "-Wall", "-Wextra", "-Wno-cast-function-type"]
    }
  ]
}
