{
  "targets": [
    {
      "target_name": "shm",
      "sources": ["shm.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"]
    }
  ]
}
