"""Index datamaps at query time: the files a query's filters rule out."""
