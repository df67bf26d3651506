// BSON for pipeline-step plugins: zero-copy reader, writer, copy-on-write edits.
export { BsonType, BsonDoc, BsonValue, BsonIterator, BsonBinary, BsonRegex, BsonTimestamp, valueSize } from "./reader";
export { BsonWriter } from "./writer";
export {
  setValue, setElementValue, setString, setI32, setI64, setF64, setBool, setDate, setNull, setDoc, setArray,
  unset, rename, redact,
} from "./edit";
export { utf8EqualsRange, hexOf } from "./utf8";
