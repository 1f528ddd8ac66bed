"""The toy world (``--dataset toy``): short word problems, a team of four, the demo's world."""
