"""PyMongo through the proxy: CRUD, cursors, bulk writes and errors.

Usage: crud.py <mongodb uri> <database name>
Prints one JSON line with what it observed; exits non-zero on the first failed check.
"""
import json
import sys

import pymongo
from pymongo import InsertOne, UpdateOne, DeleteOne, ReplaceOne
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure


def check(cond, what):
    if not cond:
        print("CHECK FAILED: " + what, file=sys.stderr)
        sys.exit(1)


def main():
    uri, dbname = sys.argv[1], sys.argv[2]
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000, connectTimeoutMS=10000, socketTimeoutMS=60000)
    out = {}
    try:
        hello = client.admin.command("ismaster")
        out["msg"] = hello.get("msg")
        out["compression"] = hello.get("compression")
        info = client.server_info()
        out["server_info_ok"] = info.get("ok")

        db = client[dbname]
        c = db.crud
        c.drop()
        r = c.insert_one({"_id": 1, "k": "a", "v": 1})
        check(r.inserted_id == 1, "insert_one id")
        r = c.insert_many([{"_id": i, "k": "abc"[i % 3], "v": i} for i in range(2, 11)])
        check(len(r.inserted_ids) == 9, "insert_many ids")
        check(c.count_documents({}) == 10, "count 10")
        r = c.update_one({"_id": 2}, {"$set": {"v": 200}})
        check(r.matched_count == 1 and r.modified_count == 1, "update_one")
        r = c.update_many({"k": "a"}, {"$inc": {"v": 1000}})
        out["update_many_matched"] = r.matched_count
        r = c.replace_one({"_id": 3}, {"k": "z", "v": -3})
        check(r.modified_count == 1, "replace_one")
        doc = c.find_one_and_update({"_id": 4}, {"$set": {"seen": True}}, return_document=pymongo.ReturnDocument.AFTER)
        check(doc["seen"] is True, "find_one_and_update")
        r = c.delete_one({"_id": 5})
        check(r.deleted_count == 1, "delete_one")
        r = c.delete_many({"v": {"$gte": 1000}})
        out["delete_many"] = r.deleted_count
        out["remaining"] = sorted(d["_id"] for d in c.find({}, {"_id": 1}))
        out["distinct"] = sorted(c.distinct("k"))

        # A cursor over many getMore batches.
        big = db.big
        big.drop()
        big.insert_many([{"_id": i, "pad": "p" * 50} for i in range(3000)])
        ids = [d["_id"] for d in big.find({}, batch_size=13).sort("_id", 1)]
        check(ids == list(range(3000)), "cursor sees every document once, in order")
        out["cursor_seen"] = len(ids)

        # Aggregation.
        out["agg"] = list(c.aggregate([
            {"$group": {"_id": "$k", "n": {"$sum": 1}}},
            {"$sort": {"_id": 1}},
        ]))

        # Bulk: ordered mixed bulk, then a big unordered insert the driver splits by size.
        r = c.bulk_write([InsertOne({"_id": 100}), UpdateOne({"_id": 100}, {"$set": {"b": 1}}),
                          ReplaceOne({"_id": 4}, {"r": True}), DeleteOne({"_id": 7})])
        check(r.inserted_count == 1 and r.modified_count == 2 and r.deleted_count == 1, "bulk_write counts")
        blob = "x" * (512 * 1024)
        r = db.bulkbig.insert_many([{"i": i, "blob": blob} for i in range(120)], ordered=False)  # ~60 MB
        check(len(r.inserted_ids) == 120, "big insert_many")
        out["bulk_big_count"] = db.bulkbig.count_documents({})

        # Errors.
        try:
            c.insert_one({"_id": 2})
            out["dup"] = None
        except DuplicateKeyError as e:
            out["dup"] = e.code
            out["dup_msg_has_dup"] = "duplicate key" in str(e)
        try:
            c.bulk_write([InsertOne({"_id": 200}), InsertOne({"_id": 200}), InsertOne({"_id": 201})])
        except BulkWriteError as e:
            out["bulk_err"] = [w["code"] for w in e.details["writeErrors"]]
            out["bulk_err_inserted"] = e.details["nInserted"]
        try:
            db.command("thisCommandDoesNotExist")
            out["unknown"] = None
        except OperationFailure as e:
            out["unknown"] = e.code
        print(json.dumps(out, sort_keys=True))
    finally:
        client.close()


if __name__ == "__main__":
    main()
