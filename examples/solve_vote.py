import parallax

result = parallax.solve("Is 221 a prime number?", mode="vote")
print(result.status, result.answer)
